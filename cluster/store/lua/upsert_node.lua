-- Create or update a node's observed state. ARGV: name, unschedulable (0/1),
-- allocatable ("name amount ..."), spec (msgpack). Allocated figures and owner are kept.
-- A new node accounts the pods already bound to it (a pod may be observed before its node).
local name, unsched, alloc, spec = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local key = node_key(name)
node_rewritten(name)
local is_new = redis.call('EXISTS', key) == 0
local fields = redis.call('HKEYS', key)
for _, f in ipairs(fields) do
  if string.sub(f, 1, 2) == 'a:' then redis.call('HDEL', key, f) end
end
local args = {'unsched', unsched, 'spec', spec, 'version', version()}
for _, r in ipairs(parse_request(alloc)) do
  args[#args + 1] = 'a:' .. r[1]
  args[#args + 1] = r[2]
end
redis.call('HSET', key, unpack(args))
changed('node', name)
if is_new then
  redis.call('HSET', key, 'owner', '')
  redis.call('SADD', P .. 'index:node', name)
  for _, uid in ipairs(redis.call('SMEMBERS', P .. 'bynode:' .. name)) do
    local pod = redis.call('HMGET', pod_key(uid), 'acct', 'req', 'phase', 'cards')
    if pod[2] and pod[1] == '' and not terminal(pod[3]) then
      set_accounted(uid, '', '', name, held(pod[2], pod[4]))
      redis.call('HSET', pod_key(uid), 'version', version())
      changed('pod', uid)
    end
  end
end
return publish()
