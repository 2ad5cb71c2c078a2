-- Sliding-window counter (seed 000), atomic in Redis. Mirrors src/window.rs.
-- KEYS[1] = the caller's counter, hash-tagged: "rl:{caller}:route" (fields w, c, p)
-- ARGV[1] = limit per window, ARGV[2] = window length in milliseconds, ARGV[3] = requests the
-- instance admitted in this window on its own while it could not reach Redis (counted first),
-- ARGV[4] = '1' to count them and decide nothing, ARGV[5] = those it admitted on its own in the
-- window before (counted into the previous window, which the estimate weighs)
-- Returns { allowed (0/1), remaining, retry_after_ms, more_ms (until more than remaining fits) }
local limit = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2])

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local w = math.floor(now_ms / window_ms)
local elapsed = now_ms - w * window_ms
local pos = elapsed / window_ms

local s = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local sw, c, p = tonumber(s[1]), tonumber(s[2]) or 0, tonumber(s[3]) or 0
if sw == nil or sw < w - 1 or sw > w then
  c, p = 0, 0
elseif sw == w - 1 then
  p, c = c, 0
end

c = c + (tonumber(ARGV[3]) or 0)
p = p + (tonumber(ARGV[5]) or 0)

if ARGV[4] == '1' then
  -- Counting only (the instance's reconciliation after an outage): no decision.
  redis.call('HSET', KEYS[1], 'w', w, 'c', c, 'p', p)
  redis.call('PEXPIRE', KEYS[1], window_ms * 2)
  return { 0, 0, 0, 0 }
end

local estimate = p * (1 - pos) + c
-- Strictly below the limit, not "estimate + 1 <= limit" (seed 000's): see src/window.rs.
local allowed = estimate < limit
if allowed then c = c + 1 end

redis.call('HSET', KEYS[1], 'w', w, 'c', c, 'p', p)
redis.call('PEXPIRE', KEYS[1], window_ms * 2)

local remaining = math.max(0, math.floor(limit - (p * (1 - pos) + c)))
local retry_ms = 0
if not allowed then
  if limit <= 0 then
    retry_ms = window_ms
  elseif c < limit then
    local target = 1 - (limit - c) / p
    retry_ms = math.max(0, (target - pos) * window_ms)
  else
    local next_pos = math.max(0, 1 - limit / c)
    retry_ms = (1 - pos) * window_ms + next_pos * window_ms
  end
end
-- Until one more than `remaining` fits (draft 11's `t`): the estimate decays by p over the rest
-- of this window, then by c over the next. Mirrors `more_in` in src/window.rs.
local to_fall = p * (1 - pos) + c - (limit - remaining - 1)
local this_window = p * (1 - pos)
local more_ms = 0
if to_fall <= 0 then
  more_ms = 0
elseif to_fall <= this_window then
  more_ms = to_fall / p * window_ms
elseif to_fall - this_window <= c then
  more_ms = (1 - pos) * window_ms + (to_fall - this_window) / c * window_ms
else
  more_ms = (1 - pos) * window_ms + window_ms
end
return { allowed and 1 or 0, remaining, math.ceil(retry_ms), math.ceil(more_ms) }
