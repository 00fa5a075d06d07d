-- Create or update a pod's observed state. ARGV: uid, namespace, name, schedulerName,
-- group key, priority, request ("name amount ..."), nodeName, phase, spec (msgpack), and the
-- GPU cards' shares its annotations say it holds ('' when they say none).
--
-- nodeName '' keeps a binding the binder already made (the observer lags the binder);
-- a non-empty nodeName is observed truth and wins (pods of other schedulers arrive bound).
-- A pod holds resources on its node while it is bound and not Succeeded/Failed; its cards
-- are those the binder committed for it, unless its annotations name others.
local uid, ns, name, sched, group, prio, req, node, phase, spec, cards =
  ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13]
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
redis.call('HSET', key, 'ns', ns, 'name', name, 'sched', sched, 'group', group, 'prio', prio,
  'req', req, 'node', eff, 'phase', phase, 'spec', spec, 'cards', cards, 'version', version())
changed('pod', uid)
if old_acct == '' and not old[3] then redis.call('HSET', key, 'acct', '') end
local target = ''
if eff ~= '' and not terminal(phase) and redis.call('EXISTS', node_key(eff)) == 1 then target = eff end
set_accounted(uid, old_acct, held(old_req, old_cards), target, held(req, cards))
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
return publish()
