-- Create or update pods' observed state: one or more pods per call, ARGV[3..] in groups of 11 per
-- pod: uid, namespace, name, schedulerName, group key, priority, request ("name amount ..."),
-- nodeName, phase, spec (msgpack), and the GPU cards' shares its annotations say it holds ('' when
-- they say none). Every pod of a call gets the call's one version; returns it once per pod. The
-- call's feed entry carries the pods' records (the prelude's carry()).
--
-- nodeName '' keeps a binding the binder already made (the observer lags the binder);
-- a non-empty nodeName is observed truth and wins (pods of other schedulers arrive bound).
-- A pod holds resources on its node while it is bound and not Succeeded/Failed; its cards
-- are those the binder committed for it, unless its annotations name others.
local function upsert(a)
  local uid, ns, name, sched, group, prio, req, node, phase, spec, cards =
    ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7],
    ARGV[a + 8], ARGV[a + 9], ARGV[a + 10]
  local key = pod_key(uid)
  local old = redis.call('HMGET', key, 'node', 'acct', 'req', 'sched', 'cards')
  local old_node, old_acct, old_req, old_sched = old[1] or '', old[2] or '', old[3] or '', old[4]
  local old_cards = old[5] or ''
  if not old[3] then redis.call('SADD', P .. 'index:pod', uid) end
  local eff = node
  if eff == '' then eff = old_node end
  if eff == '' then
    cards = ''
  elseif cards == '' and eff == old_node then
    cards = old_cards
  end
  local target = ''
  if eff ~= '' and not terminal(phase) and redis.call('EXISTS', node_key(eff)) == 1 then target = eff end
  -- 'acct' with the rest: set_accounted moves the request between nodes and leaves the field to this write
  redis.call('HSET', key, 'ns', ns, 'name', name, 'sched', sched, 'group', group, 'prio', prio,
    'req', req, 'node', eff, 'phase', phase, 'spec', spec, 'cards', cards, 'version', version(), 'acct', target)
  changed('pod', uid)
  set_accounted(uid, old_acct, held(old_req, old_cards), target, held(req, cards), true)
  -- the hash as it is now ('acct' is the target, set or already so)
  carry(uid, {'ns', ns, 'name', name, 'sched', sched, 'group', group, 'prio', prio, 'req', req, 'node', eff,
    'phase', phase, 'cards', cards, 'version', tostring(version()), 'acct', target}, spec)
  if old_node ~= eff then
    if old_node ~= '' then redis.call('SREM', P .. 'bynode:' .. old_node, uid) end
    if eff ~= '' then redis.call('SADD', P .. 'bynode:' .. eff, uid) end
  end
  if old_sched and old_sched ~= sched then redis.call('ZREM', P .. 'pending:' .. old_sched, uid) end
  if eff == '' and not terminal(phase) then
    redis.call('ZADD', P .. 'pending:' .. sched, 'NX', version(), uid)
  else
    redis.call('ZREM', P .. 'pending:' .. sched, uid)
  end
end
local n = 0
for a = 3, #ARGV, 11 do
  upsert(a)
  n = n + 1
end
local v = publish()
local out = {}
for i = 1, n do out[i] = v end
return out
