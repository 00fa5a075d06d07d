-- Check and apply a list of placements atomically. ARGV after the prelude's:
-- scheduler, mode ('fine' | 'coarse'), hard (0/1), gang, figures (0/1), then per placement:
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
-- (this call's own placements included), so the caller's replica of that node ends exact;
-- with figures 0 a re-checked commit comes without them ({1, version, 1, idempotent}), for a
-- caller that decides again from its own records.
-- fine: when the node's version moved, re-check the fit against the current figures and
-- commit if it still fits (a resolved conflict); coarse: any version move is a conflict.
-- gang: '0' each placement on its own; '1' all of them one gang; or the sizes of several
-- gangs, in order, separated by spaces ('3 5 2'). A gang's placements are all checked first,
-- and none is applied unless all pass; each gang of a call stands or falls on its own.
local sched, mode, hard, with_figures = ARGV[3], ARGV[4], ARGV[5] == '1', ARGV[7] == '1'
-- Only a binder commits: a caller whose Redis user may not write the binding set (the mirror,
-- the sharding controller, status: cluster/store/acl.py) is refused before anything is
-- written, since the writes a script made before an error are not undone.
if not redis.acl_check_cmd('ZADD', P .. 'binding:' .. sched, '0', '') then
  return redis.error_reply('NOPERM this user may not commit placements (no write access to ' .. P .. 'binding:*)')
end
local placements = {}
for i = 8, #ARGV, 5 do
  placements[#placements + 1] = {
    uid = ARGV[i], node = ARGV[i + 1], version = ARGV[i + 2], req = ARGV[i + 3], cards = ARGV[i + 4]}
end
local gangs = {}
if ARGV[6] == '1' then
  gangs[1] = #placements
elseif ARGV[6] ~= '0' then
  local total = 0
  for size in string.gmatch(ARGV[6], '%d+') do
    gangs[#gangs + 1] = tonumber(size)
    total = total + tonumber(size)
  end
  if total ~= #placements then
    return redis.error_reply('ERR gang sizes ' .. ARGV[6] .. ' do not add up to the ' .. #placements .. ' placements')
  end
end

-- The request and the cards as one list (parse_request's entries), a resource named twice
-- summed; the same list for every placement that takes the same.
local TAKING = {}
local function taking(p)
  local text = held(p.req, p.cards)
  local out = TAKING[text]
  if out then return out end
  local parsed = parse_request(text)
  out = parsed
  if p.cards ~= '' then
    local sums, order = {}, {}
    for _, r in ipairs(parsed) do
      if not sums[r[1]] then order[#order + 1] = r[1] end
      sums[r[1]] = (sums[r[1]] or 0) + r[2]
    end
    if #order < #parsed then
      out = {}
      for _, name in ipairs(order) do out[#out + 1] = request_entry(name, sums[name]) end
    end
  end
  TAKING[text] = out
  return out
end

-- The node fields check() reads for what a placement takes, per taking() list.
local CHECKED = {}
local function checked_fields(take)
  local fields = CHECKED[take]
  if fields then return fields end
  fields = {'version', 'owner', 'unsched'}
  for _, r in ipairs(take) do
    fields[#fields + 1] = r[3]
    fields[#fields + 1] = r[4]
  end
  CHECKED[take] = fields
  return fields
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

-- Returns (result, apply): apply is true when the placement may be applied. One read of the
-- pod and one of the node, whatever the number of resources.
local function check(p)
  local pod = redis.call('HMGET', pod_key(p.uid), 'node', 'phase', 'req', 'sched', 'version')
  if not pod[3] then return {3, 'unknown-pod'}, false end
  if terminal(pod[2]) then return {3, 'pod-finished'}, false end
  local take = taking(p)
  local n = redis.call('HMGET', node_key(p.node), unpack(checked_fields(take)))
  if pod[1] == p.node then return {1, tonumber(n[1]) or 0, 0, 1}, false end
  if pod[1] ~= '' then return {3, 'already-bound'}, false end
  if pod[3] ~= p.req then return {3, 'request-mismatch'}, false end
  if not n[1] then return {3, 'unknown-node'}, false end
  if hard and n[2] ~= sched then return {3, 'not-owner'}, false end
  p.sched, p.seen, p.from = pod[4], n[1], pod[5] or '0'
  local moved = (before[p.node] or n[1]) ~= p.version
  if moved and mode == 'coarse' then return {2}, false end
  local fits = n[3] ~= '1'
  local short = {}
  local taken = extra[p.node] or {}
  for j, r in ipairs(take) do
    local alloc, used = tonumber(n[2 + 2 * j]) or 0, tonumber(n[3 + 2 * j]) or 0
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

-- The set and index changes of every applied placement, gathered per key and written once
-- per key at the end (one command for many pods, not one per pod).
local members = {}  -- key -> {command, uids}
local member_keys = {}
local function gather(command, key, uid)
  local m = members[key]
  if not m then
    m = {command, {}}
    members[key] = m
    member_keys[#member_keys + 1] = key
  end
  m[2][#m[2] + 1] = uid
end

local SCHED_KEYS, bynode_key = {}, keys_of('bynode:')
local function apply(p, res)
  if not before[p.node] then before[p.node] = p.seen end
  account(p.node, held(p.req, p.cards), 1)
  redis.call('HSET', pod_key(p.uid), 'acct', p.node, 'node', p.node, 'cards', p.cards, 'version', version())
  -- the change goes with the feed entry: a reader holding the pending pod needs no fetch
  carry_change(p.uid, p.from, {'acct', p.node, 'node', p.node, 'cards', p.cards, 'version', tostring(RV)})
  gather('SADD', bynode_key(p.node), p.uid)
  local keys = SCHED_KEYS[p.sched]
  if not keys then
    keys = {P .. 'pending:' .. p.sched, P .. 'reasons:' .. p.sched, P .. 'binding:' .. p.sched}
    SCHED_KEYS[p.sched] = keys
  end
  gather('ZREM', keys[1], p.uid)
  gather('HDEL', keys[2], p.uid)
  -- Committed, not yet bound in the cluster: left here until the bind step says it is.
  gather('ZADD', keys[3], p.uid)
  changed('pod', p.uid)
  res[2] = RV
end

-- Commands named in full (cluster/store/acl.py reads which ones a script runs from its source).
local function write_gathered()
  local STEP = 1000  -- members per command: unpack's stack has a limit
  for _, key in ipairs(member_keys) do
    local command, uids = members[key][1], members[key][2]
    for from = 1, #uids, STEP do
      local last = math.min(from + STEP - 1, #uids)
      if command == 'ZADD' then
        local args = {}
        for i = from, last do
          args[#args + 1] = now_ms()
          args[#args + 1] = uids[i]
        end
        redis.call('ZADD', key, unpack(args))
      elseif command == 'SADD' then
        redis.call('SADD', key, unpack(uids, from, last))
      elseif command == 'ZREM' then
        redis.call('ZREM', key, unpack(uids, from, last))
      else
        redis.call('HDEL', key, unpack(uids, from, last))
      end
    end
  end
end

local results = {}
local function run_gang(first, last)
  extra = {}
  local oks, all_ok = {}, true
  for i = first, last do
    local p = placements[i]
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
  for i = first, last do
    if oks[i] then
      if all_ok then apply(placements[i], results[i]) else results[i] = {3, 'gang-member-failed'} end
    end
  end
end

if #gangs == 0 then
  for i, p in ipairs(placements) do
    local res, ok = check(p)
    if ok then apply(p, res) end
    results[i] = res
  end
else
  local first = 1
  for _, size in ipairs(gangs) do
    run_gang(first, first + size - 1)
    first = first + size
  end
end
write_gathered()
-- Conflicts and re-checked commits get the node's figures as the call leaves it.
local figures = {}
for i, p in ipairs(placements) do
  local r = results[i]
  if r[1] == 2 or (r[1] == 1 and r[3] == 1 and with_figures) then
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
