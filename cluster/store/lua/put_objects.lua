-- Write or delete whole objects of the simple kinds (podgroup, queue, priorityclass,
-- nodeshard) and set node owners, all under one version. ARGV after the prelude's:
-- quadruples (op, kind, name, value) where op is 'put' (value = spec), 'del' (value
-- ignored) or 'own' (kind 'node', value = the owning scheduler, '' for none).
local i = 3
while i <= #ARGV do
  local op, kind, name, value = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if op == 'own' then
    local key = node_key(name)
    if redis.call('EXISTS', key) == 1 and redis.call('HGET', key, 'owner') ~= value then
      node_rewritten(name)
      redis.call('HSET', key, 'owner', value, 'version', version())
      changed('node', name)
    end
  elseif op == 'put' then
    redis.call('HSET', P .. kind .. ':' .. name, 'spec', value, 'version', version())
    redis.call('SADD', P .. 'index:' .. kind, name)
    changed(kind, name)
  else
    if redis.call('DEL', P .. kind .. ':' .. name) == 1 then
      redis.call('SREM', P .. 'index:' .. kind, name)
      version()
      changed('-' .. kind, name)
    end
  end
  i = i + 4
end
return publish()
