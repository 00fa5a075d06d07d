-- Remove a node. Pods bound to it keep their binding but no longer hold resources
-- anywhere (their node is gone); they leave when their own deletion is observed.
local name = ARGV[3]
local key = node_key(name)
if redis.call('EXISTS', key) == 0 then return 0 end
node_rewritten(name)
for _, uid in ipairs(redis.call('SMEMBERS', P .. 'bynode:' .. name)) do
  if redis.call('HGET', pod_key(uid), 'acct') == name then
    redis.call('HSET', pod_key(uid), 'acct', '', 'version', version())
    changed('pod', uid)
  end
end
redis.call('DEL', key)
redis.call('SREM', P .. 'index:node', name)
version()
changed('-node', name)
return publish()
