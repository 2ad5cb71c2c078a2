-- Token bucket (seed 004), refill computed in Redis. Mirrors src/bucket.rs.
-- KEYS[1] = the caller's bucket, hash-tagged: "rl:{caller}:route" (fields tokens, ts)
-- ARGV[1] = capacity (the limit per window), ARGV[2] = window length in milliseconds,
-- ARGV[3] and ARGV[5] = requests the instance admitted on its own in this window and the one
-- before while it could not reach Redis (taken first: the bucket may go below zero, and refills
-- from there), ARGV[4] = '1' to take them and
-- decide nothing
-- Returns { allowed (0/1), remaining, retry_after_ms, more_ms (until more than remaining fits) }
local capacity = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2])
local rate = capacity / window_ms -- tokens per millisecond

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(s[1]), tonumber(s[2])
if tokens == nil or ts == nil then
  tokens = capacity
else
  tokens = math.min(capacity, tokens + math.max(0, now_ms - ts) * rate)
end

tokens = tokens - (tonumber(ARGV[3]) or 0) - (tonumber(ARGV[5]) or 0)

if ARGV[4] == '1' then
  -- Counting only (the instance's reconciliation after an outage): no decision.
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now_ms))
  redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - math.min(tokens, 0)) / rate))
  return { 0, 0, 0, 0 }
end

local allowed = tokens >= 1
if allowed then tokens = tokens - 1 end

redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now_ms))
-- A full refill takes one window: after that the key holds nothing a new bucket would not.
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - math.min(tokens, 0)) / rate))

local retry_ms = 0
if not allowed then retry_ms = (1 - tokens) / rate end
local remaining = math.max(0, math.floor(tokens))
-- The next whole token, not a full bucket: it refills steadily. Mirrors src/bucket.rs.
return { allowed and 1 or 0, remaining, math.ceil(retry_ms), math.ceil((remaining + 1 - tokens) / rate) }
