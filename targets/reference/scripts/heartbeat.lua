-- Live instance count: each instance scores its id with Redis's clock; stale ids fall out.
-- KEYS[1] = the instance set, ARGV[1] = this instance's id, ARGV[2] = staleness in milliseconds
-- Returns { number of live instances, this one included; this one's rank among their ids in
-- Lua's string order (the same for every caller of one Redis), from 0 }.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale_ms = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now_ms, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms - stale_ms)
redis.call('PEXPIRE', KEYS[1], stale_ms * 2)
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
table.sort(ids)
local rank = 0
for i, id in ipairs(ids) do
  if id == ARGV[1] then rank = i - 1 end
end
return { #ids, rank }
