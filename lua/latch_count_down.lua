-- Count a count-down latch down by one (RedissonCountDownLatch.countDownAsync).
-- KEYS[1]  latch name (STRING: the count, decimal)
-- KEYS[2]  latch channel "redisson_countdownlatch__channel__{name}"
-- KEYS[3]  the call's receipt (see lua/latch_receipt.lua)
-- ARGV[1]  message to publish when the count reaches zero ("0")
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  the receipt's time to live in ms
-- Reply:   the count after the call, as a decimal string (exact for any 64-bit count):
--          "0"                 the count reached zero: key deleted, ARGV[1] published on KEYS[2];
--                              or the latch was open already (absent, or a count <= 0):
--                              nothing changed, nothing published
--          "<n>"               DECR left n > 0
--          error WRONGTYPE     the key is not a STRING holding an integer: nothing changed
--          a receipt's reply   the call was made before (its reply was lost): nothing changed
-- Redisson DECRs blindly (an absent key becomes -1, then is deleted); this is a no-op instead.
local made = redis.call('get', KEYS[3]);
if made then
    return made;
end;
-- One read tells all: absent (false), not a string (an error), or the count.
local v = redis.pcall('get', KEYS[1]);
if v == false then
    return '0';
end;
if type(v) ~= 'string' or not is_int(v) then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value');
end;
if string.sub(v, 1, 1) == '-' or v == '0' then
    return '0';
end;
if redis.call('decr', KEYS[1]) == 0 then
    redis.call('del', KEYS[1]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return receipt('0');
end;
return receipt(redis.call('get', KEYS[1]));
