-- The node each pod is bound to ('' when pending), false for a pod that does not exist.
-- ARGV[3..]: pod uids. Reads only: no version, no feed entry.
local out = {}
for i = 3, #ARGV do
  local node = redis.call('HGET', pod_key(ARGV[i]), 'node')
  out[#out + 1] = node
end
return out
