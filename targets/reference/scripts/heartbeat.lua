-- Live instance count: each instance scores its id with Redis's clock; stale ids fall out.
-- KEYS[1] = the instance set, ARGV[1] = this instance's id, ARGV[2] = staleness in milliseconds
-- Returns { number of live instances, this one included }.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale_ms = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now_ms, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms - stale_ms)
redis.call('PEXPIRE', KEYS[1], stale_ms * 2)
return { redis.call('ZCARD', KEYS[1]) }
