-- Pods' phase as their kubelets report it, on the node they are bound to: ARGV[3..] in groups of 5 per
-- pod: uid, node, phase (never Succeeded or Failed: a pod's end is its deletion, which gives its
-- resources back), the pod's version the report was made from, and the pod as reported (msgpack).
-- Only a pod still at that version (so bound to that node, its spec the one reported on), not ended,
-- and in another phase changes: its phase and its spec, nothing accounted anew (its node's figures
-- hold it already). The call's feed entry carries each change (the prelude's carry_change): a reader
-- holding the pod applies it rather than fetching the pod. Returns, per pod, the call's version, or 0
-- for a pod left as it was (gone, changed since, ended, or in that phase already).
local set = {}
for a = 3, #ARGV, 5 do
  local uid, node, phase, from, spec = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local key = pod_key(uid)
  local pod = redis.call('HMGET', key, 'node', 'phase', 'version')
  if node ~= '' and pod[1] == node and pod[3] == from and pod[2] ~= phase and not terminal(pod[2]) then
    redis.call('HSET', key, 'phase', phase, 'spec', spec, 'version', version())
    carry_change(uid, pod[3] or '0', {'phase', phase, 'version', tostring(RV)})
    changed('pod', uid)
    set[(a - 3) / 5 + 1] = true
  end
end
local v = publish()
local out = {}
for i = 1, (#ARGV - 2) / 5 do out[i] = set[i] and v or 0 end
return out
