-- A consistent read of everything the audit checks (one atomic script, read only).
-- Returns {nodes, pods, bynode, pending}:
--   nodes: {name, {field, value, ...}} with the a:, u:, unsched fields
--   pods: {uid, node, acct, held (request and cards), phase, sched}
--   bynode: {node, {uid, ...}} for every bynode set, including those of deleted nodes
--   pending: {sched, {uid, ...}}
local nodes = {}
for _, name in ipairs(redis.call('SMEMBERS', P .. 'index:node')) do
  local all = redis.call('HGETALL', node_key(name))
  local keep = {}
  for j = 1, #all, 2 do
    local f = all[j]
    if string.sub(f, 1, 2) == 'a:' or string.sub(f, 1, 2) == 'u:' then
      keep[#keep + 1] = f
      keep[#keep + 1] = all[j + 1]
    end
  end
  nodes[#nodes + 1] = {name, keep}
end
local pods = {}
local scheds = {}
for _, uid in ipairs(redis.call('SMEMBERS', P .. 'index:pod')) do
  local p = redis.call('HMGET', pod_key(uid), 'node', 'acct', 'req', 'phase', 'sched', 'cards')
  pods[#pods + 1] = {uid, p[1] or '', p[2] or '', held(p[3], p[6]), p[4] or '', p[5] or ''}
  if p[5] then scheds[p[5]] = true end
end
local bynode = {}
local cursor = '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', P .. 'bynode:*', 'COUNT', 1000)
  cursor = r[1]
  for _, key in ipairs(r[2]) do
    bynode[#bynode + 1] = {string.sub(key, #P + 8), redis.call('SMEMBERS', key)}
  end
until cursor == '0'
local pending = {}
for sched, _ in pairs(scheds) do
  pending[#pending + 1] = {sched, redis.call('ZRANGE', P .. 'pending:' .. sched, 0, -1)}
end
return {nodes, pods, bynode, pending}
