-- Remove pods; a bound pod returns its resources in the same step. ARGV[3..]: one uid per pod.
-- Returns, per pod, the call's version, or 0 for a pod that was not there.
local gone = {}
for a = 3, #ARGV do
  local uid = ARGV[a]
  local key = pod_key(uid)
  local pod = redis.call('HMGET', key, 'node', 'acct', 'req', 'sched', 'cards')
  if pod[3] then
    set_accounted(uid, pod[2], held(pod[3], pod[5]), '', '', true)  -- the pod's hash goes below
    if pod[1] ~= '' then redis.call('SREM', P .. 'bynode:' .. pod[1], uid) end
    redis.call('ZREM', P .. 'pending:' .. pod[4], uid)
    redis.call('HDEL', P .. 'reasons:' .. pod[4], uid)
    redis.call('SREM', P .. 'index:pod', uid)
    redis.call('DEL', key)
    version()
    changed('-pod', uid)
    gone[a - 2] = true
  end
end
local v = publish()
local out = {}
for i = 1, #ARGV - 2 do out[i] = gone[i] and v or 0 end
return out
