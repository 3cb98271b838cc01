-- Record that an owner took one lock while it held another (ours, not Redisson's), in the
-- pair's order records "redlatch_order:<n>:<first>:<second>" (see src/keys.rs), and answer
-- the records of the opposite order. A record's field is "<d><held><taken>": d "1" (the
-- first name held, then the second taken) or "2" (the second, then the first), each mode "r"
-- (a read) or "x"; its value "<ms on the server's clock> <who and where>". Fields "first"
-- and "second" hold the names.
-- KEYS[1]  the pair's HASH
-- ARGV[1]  the first name (in byte order)
-- ARGV[2]  the second name
-- ARGV[3]  this record's field
-- ARGV[4]  who took the locks, and where in the code
-- ARGV[5]  the records' time to live, in ms (renewed by every record)
-- Reply:   a flat array of field, value of the opposite order's records (empty when none)
--          error WRONGTYPE  the key exists and is not a hash
local mine = string.sub(ARGV[3], 1, 1);
redis.call('hset', KEYS[1], 'first', ARGV[1], 'second', ARGV[2],
    ARGV[3], clock_ms() .. ' ' .. ARGV[4]);
redis.call('pexpire', KEYS[1], ARGV[5]);
local out = {};
local all = redis.call('hgetall', KEYS[1]);
for i = 1, #all, 2 do
    local d = string.sub(all[i], 1, 1);
    if #all[i] == 3 and (d == '1' or d == '2') and d ~= mine then
        out[#out + 1] = all[i];
        out[#out + 1] = all[i + 1];
    end;
end;
return out;
