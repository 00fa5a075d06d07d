-- Shared by every caldera script; prepended to each script body.
--
-- ARGV[1] is the key prefix ("caldera:{cluster}:"), ARGV[2] the feed's approximate
-- MAXLEN. Every key a script touches carries the same hash tag, so each script stays in
-- one slot on a Redis Cluster. KEYS[1] is the prefix's `rv` key, declared for routing.
--
-- Versions: a script that changes anything takes ONE new resourceVersion (INCR rv), gives
-- it to every object it changes, and appends ONE feed entry with stream id `<rv>-0`. The
-- feed ids are therefore consecutive, and a reader that sees a jump knows it missed
-- entries (the feed was trimmed past it) and must re-list.
local P = ARGV[1]
local FEEDLEN = ARGV[2]
local RV = nil
local CHANGES = {}

local function version()
  if not RV then RV = redis.call('INCR', P .. 'rv') end
  return RV
end

-- One feed line per object, however often a call changes it (a node many pods moved on, a pod
-- written twice); the names already told are kept per code, so a repeat makes no new string.
local CHANGED = {}
local function changed(code, name)
  local told = CHANGED[code]
  if not told then
    told = {}
    CHANGED[code] = told
  end
  if not told[name] then
    told[name] = true
    CHANGES[#CHANGES + 1] = code .. ':' .. name
  end
end

-- The store's epoch: made when the store is (the first write to an empty store makes it),
-- and carried by every feed entry, so that a reader learns when the store under it was
-- emptied or replaced (Redis restarted without its data, a FLUSHALL) and lists again.
local function epoch()
  local e = redis.call('GET', P .. 'epoch')
  if not e then
    local t = redis.call('TIME')
    e = t[1] .. '.' .. t[2]
    redis.call('SET', P .. 'epoch', e)
  end
  return e
end

-- Pods whose records go with this script's feed entry (carry()): the observed writes of pods —
-- a burst created, pods started — so that a reader has them in its read of the feed, without a
-- fetch after it. By uid, the record as msgpack (a map of the hash's fields), the last one given;
-- or, for a write that changes a few fields of a pod (a commit: carry_change()), those fields and
-- the version they change, which a reader applies to the record it holds at that version.
local CARRIED = {}
local CARRIED_ORDER = {}
local function map32(n)
  return '\223' .. struct.pack('>I4', n)
end

-- `pairs`: the pod hash's text fields as a list of name, value (every field but the spec, each
-- value a string); `spec`: the spec, msgpack already, put in as it is.
local function carry(uid, pairs, spec)
  if CARRIED[uid] == nil then CARRIED_ORDER[#CARRIED_ORDER + 1] = uid end
  CARRIED[uid] = map32(#pairs / 2 + 1) .. cmsgpack.pack(unpack(pairs)) .. cmsgpack.pack('spec') .. spec
end

-- `pairs`: the fields this script set on the pod (name, value, as strings); `from`: the pod's
-- version before it. A pod this script carried already goes without (a reader fetches it): a
-- change is no record on its own.
local function carry_change(uid, from, pairs)
  if CARRIED[uid] ~= nil then
    CARRIED[uid] = false
    return
  end
  CARRIED_ORDER[#CARRIED_ORDER + 1] = uid
  CARRIED[uid] = map32(#pairs / 2 + 1) .. cmsgpack.pack(unpack(pairs)) .. cmsgpack.pack('from', from)
end

-- The `recent` stream: for an entry of the feed that carries pods, an entry of the same id with
-- field 'r', the pods' records as msgpack: a map of uid to the record, which a reader decodes with
-- the specs in one call. Kept short (RECENT_LEN entries, about): a reader further behind fetches
-- what changed, as it does for an entry that carries nothing.
local RECENT_LEN = 500
local function carried_records()
  local parts, n = {''}, 0
  for _, uid in ipairs(CARRIED_ORDER) do
    if CARRIED[uid] then
      parts[#parts + 1] = cmsgpack.pack(uid)
      parts[#parts + 1] = CARRIED[uid]
      n = n + 1
    end
  end
  parts[1] = map32(n)
  return table.concat(parts)
end

-- Nodes whose figures this script changed by accounting alone (account()), carried to the node readers
-- in the `recent_nodes` stream under the entry's id: per node, the version it had before this script and
-- the used amounts it has now of each resource accounted, which a reader applies to the node it holds at
-- that version, rather than fetch the node (and decode its spec) again. false: a node this script wrote
-- otherwise too (its spec, its owner, or deleted it: node_rewritten()), which readers fetch. Every
-- script that changed a node adds its entry, an empty map when it carries none, so that a reader of
-- nodes alone waits on this stream and is not woken by writes of pods alone (feed.py's wake_on_nodes).
local NODE_CARRY = {}
local NODE_ORDER = {}
local function node_rewritten(node)
  if NODE_CARRY[node] == nil then NODE_ORDER[#NODE_ORDER + 1] = node end
  NODE_CARRY[node] = false
end

-- Per node carried: its name, then {version before, version now, resource, used, resource, used ...}.
local function carried_nodes()
  local parts, n = {''}, 0
  for _, node in ipairs(NODE_ORDER) do
    local c = NODE_CARRY[node]
    if c then
      local change = {tonumber(c.from) or 0, RV}
      for name, used in pairs(c.used) do
        change[#change + 1] = name
        change[#change + 1] = used
      end
      parts[#parts + 1] = cmsgpack.pack(node)
      parts[#parts + 1] = cmsgpack.pack(change)
      n = n + 1
    end
  end
  parts[1] = map32(n)
  return table.concat(parts)
end

-- Each entry carries when it was written ('t', microseconds since the epoch, Redis's clock), so
-- that a reader can tell how long a change took to reach it.
local function publish()
  if RV then
    local t = redis.call('TIME')
    redis.call('XADD', P .. 'feed', 'MAXLEN', '~', FEEDLEN, RV .. '-0', 'c', table.concat(CHANGES, '\n'),
      'e', epoch(), 't', t[1] .. string.format('%06d', tonumber(t[2])))
    if #CARRIED_ORDER > 0 then
      redis.call('XADD', P .. 'recent', 'MAXLEN', '~', RECENT_LEN, RV .. '-0', 'r', carried_records())
    end
    if #NODE_ORDER > 0 then
      redis.call('XADD', P .. 'recent_nodes', 'MAXLEN', '~', RECENT_LEN, RV .. '-0', 'n', carried_nodes())
    end
  end
  return RV or 0
end

-- Keys and parsed requests are kept for the script's run: a script touches the same node
-- or meets the same request many times, and making a Lua string costs more than the
-- hash command that uses it.
local function keys_of(kind)
  local made = {}
  return function(name)
    local k = made[name]
    if not k then
      k = P .. kind .. name
      made[name] = k
    end
    return k
  end
end
local node_key, pod_key = keys_of('node:'), keys_of('pod:')

-- A request is stored and passed as "name amount name amount ..." (amounts integers).
-- Returns {name, amount, 'a:' .. name, 'u:' .. name, amount text, -amount text} per entry,
-- shared by every caller that parses the same text: read it, never change it.
local function request_entry(name, n)
  return {name, n, 'a:' .. name, 'u:' .. name, string.format('%.0f', n), n == 0 and '0' or string.format('%.0f', -n)}
end
local PARSED = {}
local function parse_request(s)
  local out = PARSED[s]
  if out then return out end
  out = {}
  for name, amount in string.gmatch(s, '(%S+) (%S+)') do
    out[#out + 1] = request_entry(name, tonumber(amount))
  end
  PARSED[s] = out
  return out
end

-- What a pod holds on its node: its request and, for GPUs, its cards' shares ("name amount ...").
local function held(req, cards)
  if cards == nil or cards == '' then return req or '' end
  if req == nil or req == '' then return cards end
  return req .. ' ' .. cards
end

local function terminal(phase)
  return phase == 'Succeeded' or phase == 'Failed'
end

-- Add (sign 1) or remove (sign -1) a request to a node's allocated figures and bump the
-- node's version. The node must exist.
local function account(node, req, sign)
  local key = node_key(node)
  local c = NODE_CARRY[node]
  if c == nil then
    c = {from = redis.call('HGET', key, 'version'), used = {}}
    NODE_CARRY[node] = c
    NODE_ORDER[#NODE_ORDER + 1] = node
  end
  for _, r in ipairs(parse_request(req)) do
    local used = redis.call('HINCRBY', key, r[4], sign > 0 and r[5] or r[6])
    if c then c.used[r[1]] = used end
  end
  redis.call('HSET', key, 'version', version())
  changed('node', node)
end

-- Set a pod's accounted node to `target` ('' for none), moving its request between nodes.
-- `written`: the caller sets the pod's 'acct' itself (in its own HSET of the pod, or by deleting it).
local function set_accounted(uid, old_acct, old_req, target, new_req, written)
  if old_acct == target and old_req == new_req then return end
  if old_acct ~= '' and redis.call('EXISTS', node_key(old_acct)) == 1 then
    account(old_acct, old_req, -1)
  end
  if target ~= '' then account(target, new_req, 1) end
  if not written then redis.call('HSET', pod_key(uid), 'acct', target) end
end
