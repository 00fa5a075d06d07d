-- Check and apply a list of placements atomically. ARGV after the prelude's:
-- scheduler, mode ('fine' | 'coarse'), hard (0/1), gang (0/1), then per placement:
-- pod uid, node, node version the scheduler decided on, request ("name amount ..."), and
-- the GPU cards' shares it takes there ("gpu.caldera.io/<card> amount ...", '' for none).
-- The cards are checked and taken with the request, in the same step, and held by the pod
-- (field 'cards') until it is released, deleted or finishes.
--
-- Result per placement (nested array):
--   {1, version, resolved, idempotent}                    committed
--   {1, version, 1, idempotent, unschedulable, name, allocatable, allocated, ...}
--                                                           committed after a re-check
--   {2, version, unschedulable, name, allocatable, allocated, ...}   conflict
--   {3, reason}                                             rejected
-- The figures on a conflict or a re-checked commit are the node's as this call leaves it
-- (this call's own placements included), so the caller's replica of that node ends exact.
-- fine: when the node's version moved, re-check the fit against the current figures and
-- commit if it still fits (a resolved conflict); coarse: any version move is a conflict.
-- gang: check every placement first, apply nothing unless all pass.
local sched, mode, hard, gang = ARGV[3], ARGV[4], ARGV[5] == '1', ARGV[6] == '1'
local placements = {}
for i = 7, #ARGV, 5 do
  placements[#placements + 1] = {
    uid = ARGV[i], node = ARGV[i + 1], version = ARGV[i + 2], req = ARGV[i + 3], cards = ARGV[i + 4]}
end

-- The request and the cards as one list, a resource named twice summed.
local function taking(p)
  if p.cards == '' then return parse_request(p.req) end
  local sums, order = {}, {}
  for _, r in ipairs(parse_request(held(p.req, p.cards))) do
    if not sums[r[1]] then order[#order + 1] = r[1] end
    sums[r[1]] = (sums[r[1]] or 0) + r[2]
  end
  local out = {}
  for _, name in ipairs(order) do out[#out + 1] = {name, sums[name]} end
  return out
end

local function conflict(key, ver, unsched)
  local out = {2, ver, unsched}
  local all = redis.call('HGETALL', key)
  local used = {}
  for j = 1, #all, 2 do
    if string.sub(all[j], 1, 2) == 'u:' then used[string.sub(all[j], 3)] = all[j + 1] end
  end
  for j = 1, #all, 2 do
    if string.sub(all[j], 1, 2) == 'a:' then
      local name = string.sub(all[j], 3)
      out[#out + 1] = name
      out[#out + 1] = all[j + 1]
      out[#out + 1] = used[name] or '0'
      used[name] = nil
    end
  end
  for name, amount in pairs(used) do
    out[#out + 1] = name
    out[#out + 1] = '0'
    out[#out + 1] = amount
  end
  return out
end

-- extra[node][resource]: amounts tentatively taken by earlier members of a gang.
local extra = {}
-- before[node]: the node's version before this call changed it, so that a batch's own
-- earlier placements do not count as the node having moved under the scheduler.
local before = {}

-- Returns (result, apply): apply is true when the placement may be applied.
local function check(p)
  local pod = redis.call('HMGET', pod_key(p.uid), 'node', 'phase', 'req')
  if not pod[3] then return {3, 'unknown-pod'}, false end
  if terminal(pod[2]) then return {3, 'pod-finished'}, false end
  local key = node_key(p.node)
  local n = redis.call('HMGET', key, 'version', 'owner', 'unsched')
  if pod[1] == p.node then return {1, tonumber(n[1]) or 0, 0, 1}, false end
  if pod[1] ~= '' then return {3, 'already-bound'}, false end
  if pod[3] ~= p.req then return {3, 'request-mismatch'}, false end
  if not n[1] then return {3, 'unknown-node'}, false end
  if hard and n[2] ~= sched then return {3, 'not-owner'}, false end
  local moved = (before[p.node] or n[1]) ~= p.version
  if moved and mode == 'coarse' then return {2}, false end
  local fits = n[3] ~= '1'
  local short = {}
  local taken = extra[p.node] or {}
  for _, r in ipairs(taking(p)) do
    local f = redis.call('HMGET', key, 'a:' .. r[1], 'u:' .. r[1])
    local alloc, used = tonumber(f[1]) or 0, tonumber(f[2]) or 0
    if used + (taken[r[1]] or 0) + r[2] > alloc then
      fits = false
      short[#short + 1] = r[1]
    end
  end
  if fits then
    return {1, 0, moved and 1 or 0, 0}, true
  end
  if moved then return {2}, false end
  if n[3] == '1' then return {3, 'unschedulable'}, false end
  return {3, 'insufficient ' .. table.concat(short, ',')}, false
end

-- The commit's time in ms (Redis's clock): when each pod entered its scheduler's binding set.
local NOW = nil
local function now_ms()
  if not NOW then
    local t = redis.call('TIME')
    NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return NOW
end

local function apply(p, res)
  local key = pod_key(p.uid)
  if not before[p.node] then before[p.node] = redis.call('HGET', node_key(p.node), 'version') end
  set_accounted(p.uid, '', '', p.node, held(p.req, p.cards))
  redis.call('HSET', key, 'node', p.node, 'cards', p.cards, 'version', version())
  redis.call('SADD', P .. 'bynode:' .. p.node, p.uid)
  local sched_of = redis.call('HGET', key, 'sched')
  redis.call('ZREM', P .. 'pending:' .. sched_of, p.uid)
  redis.call('HDEL', P .. 'reasons:' .. sched_of, p.uid)
  -- Committed, not yet bound in the cluster: left here until the bind step says it is.
  redis.call('ZADD', P .. 'binding:' .. sched_of, now_ms(), p.uid)
  changed('pod', p.uid)
  res[2] = RV
end

local results = {}
if not gang then
  for i, p in ipairs(placements) do
    local res, ok = check(p)
    if ok then apply(p, res) end
    results[i] = res
  end
else
  local oks, all_ok = {}, true
  for i, p in ipairs(placements) do
    local res, ok = check(p)
    results[i], oks[i] = res, ok
    if ok then
      local taken = extra[p.node] or {}
      for _, r in ipairs(taking(p)) do taken[r[1]] = (taken[r[1]] or 0) + r[2] end
      extra[p.node] = taken
    elseif res[1] ~= 1 then
      all_ok = false
    end
  end
  for i, p in ipairs(placements) do
    if oks[i] then
      if all_ok then apply(p, results[i]) else results[i] = {3, 'gang-member-failed'} end
    end
  end
end
-- Conflicts and re-checked commits get the node's figures as the call leaves it.
local figures = {}
for i, p in ipairs(placements) do
  local r = results[i]
  if r[1] == 2 or (r[1] == 1 and r[3] == 1) then
    local f = figures[p.node]
    if not f then
      local key = node_key(p.node)
      local n = redis.call('HMGET', key, 'version', 'unsched')
      f = conflict(key, tonumber(n[1]), tonumber(n[2]) or 0)
      figures[p.node] = f
    end
    if r[1] == 2 then
      results[i] = f
    else
      local out = {1, r[2], 1, r[4], f[3]}
      for j = 4, #f do out[#out + 1] = f[j] end
      results[i] = out
    end
  end
end
publish()
return results
