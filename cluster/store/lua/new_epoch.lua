-- Start a new epoch: the store may no longer follow from what readers hold (Redis came back
-- from a restart, perhaps without its last writes), so every reader lists again. One feed
-- entry without changes carries the new epoch to readers at once. Returns its version.
local t = redis.call('TIME')
redis.call('SET', P .. 'epoch', t[1] .. '.' .. t[2])
version()
return publish()
