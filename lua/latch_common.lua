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
