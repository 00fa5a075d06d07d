-- Remove a pod; a bound pod returns its resources in the same step. ARGV: uid.
local uid = ARGV[3]
local key = pod_key(uid)
local pod = redis.call('HMGET', key, 'node', 'acct', 'req', 'sched', 'cards')
if not pod[3] then return 0 end
set_accounted(uid, pod[2], held(pod[3], pod[5]), '', '')
if pod[1] ~= '' then redis.call('SREM', P .. 'bynode:' .. pod[1], uid) end
redis.call('ZREM', P .. 'pending:' .. pod[4], uid)
redis.call('HDEL', P .. 'reasons:' .. pod[4], uid)
redis.call('SREM', P .. 'index:pod', uid)
redis.call('DEL', key)
version()
changed('-pod', uid)
return publish()
