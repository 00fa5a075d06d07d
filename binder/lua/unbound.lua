-- Pods a scheduler committed and has not bound in the cluster for at least ARGV[4] ms (Redis's
-- clock), oldest first, at most ARGV[5]: what a scheduler that died between the commit and
-- the bind left behind. ARGV after the prelude's: scheduler, age (ms), limit. Entries whose
-- pod is gone or holds no binding any more are dropped here. Returns uid, node pairs.
local sched, age, limit = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local key = P .. 'binding:' .. sched
local t = redis.call('TIME')
local cutoff = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - age
local out = {}
for _, uid in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', cutoff, 'LIMIT', 0, limit)) do
  local node = redis.call('HGET', pod_key(uid), 'node')
  if not node or node == '' then
    redis.call('ZREM', key, uid)
  else
    out[#out + 1] = uid
    out[#out + 1] = node
  end
end
return out
