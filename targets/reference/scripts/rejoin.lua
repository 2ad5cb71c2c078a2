-- The window from which a fleet back from an outage decides by the store again, agreed by the
-- first instance to ask: every instance that finds the store again before that window starts
-- keeps to its turns until then, so none decides by the store beside another's turns.
-- KEYS[1] = the route's rejoin key, ARGV[1] = the window this instance proposes (numbered from
-- the epoch on the wall clock), ARGV[2] = milliseconds until it starts, when the key expires.
-- Returns { the agreed window }.
local agreed = redis.call('GET', KEYS[1])
if agreed then
  return { tonumber(agreed) }
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return { tonumber(ARGV[1]) }
