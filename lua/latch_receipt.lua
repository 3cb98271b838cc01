-- Prelude of lua/latch_count_down.lua and lua/latch_try_set_count.lua (prepended by
-- src/scripts.rs, after lua/latch_common.lua).
-- A call that changes the latch (count down, try set count) writes its reply to its receipt
-- KEYS[3] "redisson_unlock_latch:{name}:<client uuid>-<n>", for ARGV[#ARGV] ms, and a call
-- that finds its receipt returns what it says: a call whose reply was lost is sent again
-- with the same receipt and changes nothing twice.
local function receipt(reply)
    redis.call('set', KEYS[3], reply, 'px', ARGV[#ARGV]);
    return reply;
end;
