-- Set a count-down latch's count if it is open (RedissonCountDownLatch.trySetCountAsync).
-- KEYS[1]  latch name (STRING: the count, decimal)
-- KEYS[2]  latch channel "redisson_countdownlatch__channel__{name}"
-- KEYS[3]  the call's receipt (see lua/latch_receipt.lua)
-- ARGV[1]  message to publish when the count is set ("1": new count)
-- ARGV[2]  the count (decimal, 1..2^63-1)
-- ARGV[3]  publish command (PUBLISH or SPUBLISH)
-- ARGV[4]  the receipt's time to live in ms
-- Reply:   1                   the key was absent: SET to ARGV[2], ARGV[1] published on KEYS[2]
--          0                   a latch exists (any integer count): nothing changed
--          error WRONGTYPE     the key is not a STRING holding an integer: nothing changed
--          "1"                 the receipt's: the call was made before (its reply was lost)
-- Redisson checks EXISTS only; the type check is ours, so a foreign key is reported, not kept.
local made = redis.call('get', KEYS[3]);
if made then
    return made;
end;
-- One read tells all: absent (false), not a string (an error), or a count.
local v = redis.pcall('get', KEYS[1]);
if v == false then
    redis.call('set', KEYS[1], ARGV[2]);
    redis.call(ARGV[3], KEYS[2], ARGV[1]);
    return receipt(1);
end;
if type(v) ~= 'string' or not is_int(v) then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value');
end;
return 0;
