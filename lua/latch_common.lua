-- Prelude of every latch_*.lua script (prepended by src/scripts.rs).
-- Whether STRING value `v` is an integer exactly as DECR accepts it (no leading zeros or '+',
-- within the signed 64-bit range): a latch's count.
local function is_int(v)
    if v == '0' then return true end;
    local digits = string.match(v, '^%-?([1-9]%d*)$');
    if digits == nil then return false end;
    local max = (string.sub(v, 1, 1) == '-') and '9223372036854775808' or '9223372036854775807';
    return #digits < 19 or (#digits == 19 and digits <= max);
end;

-- A call that changes the latch (count down, try set count) writes its reply to its receipt
-- KEYS[3] "redisson_unlock_latch:{name}:<client uuid>-<n>", for ARGV[#ARGV] ms, and a call
-- that finds its receipt returns what it says: a call whose reply was lost is sent again
-- with the same receipt and changes nothing twice.
local function receipt(reply)
    redis.call('set', KEYS[3], reply, 'px', ARGV[#ARGV]);
    return reply;
end;
