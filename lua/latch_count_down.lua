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
local function wrong_type()
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value');
end;
if type(v) ~= 'string' then
    return wrong_type();
end;
if v == '1' then
    -- The last count: deleted as DECR to 0 and then DEL would leave it, one write fewer.
    redis.call('del', KEYS[1]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return receipt('0');
end;
if string.sub(v, 1, 1) == '-' or v == '0' then
    if not is_int(v) then
        return wrong_type();
    end;
    return '0';
end;
-- DECR refuses what is no integer before it writes anything.
local left = redis.pcall('decr', KEYS[1]);
if type(left) == 'table' then
    -- Any other refusal (a replica's READONLY on a server before 7.0, which runs the
    -- script: the client tries again) goes back as it came.
    if string.sub(left.err, 1, 8) == 'READONLY' then
        return redis.error_reply(left.err);
    end;
    return wrong_type();
end;
return receipt(redis.call('get', KEYS[1]));
