-- Give back a reservation whose binding did not happen (the Kubernetes bind failed):
-- return the pod's resources and, unless it has finished, clear its binding so that it
-- is pending again for its scheduler. ARGV after the prelude's: pod uids.
-- Idempotent: a pod that holds nothing and has no binding is left as it is.
-- Returns 1 per pod that changed, else 0. (Deleted and finished pods are released by the
-- store's own scripts when that is observed; evicted pods hold their resources until then.)
local out = {}
for i = 3, #ARGV do
  local uid = ARGV[i]
  local key = pod_key(uid)
  local pod = redis.call('HMGET', key, 'node', 'acct', 'req', 'sched', 'phase', 'cards')
  local changed_pod = 0
  if pod[3] then
    redis.call('ZREM', P .. 'binding:' .. pod[4], uid)
    if pod[2] ~= '' then
      set_accounted(uid, pod[2], held(pod[3], pod[6]), '', '')
      changed_pod = 1
    end
    if pod[1] ~= '' and not terminal(pod[5]) then
      redis.call('SREM', P .. 'bynode:' .. pod[1], uid)
      redis.call('HSET', key, 'node', '', 'cards', '')
      redis.call('ZADD', P .. 'pending:' .. pod[4], version(), uid)
      changed_pod = 1
    end
    if changed_pod == 1 then
      redis.call('HSET', key, 'version', version())
      changed('pod', uid)
    end
  end
  out[#out + 1] = changed_pod
end
publish()
return out
