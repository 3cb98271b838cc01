-- Read the state of the lock or synchronizer `name` and of its helper keys in one atomic
-- snapshot (Client::inspect). Read-only: writes nothing, publishes nothing, and checks each
-- key's TYPE before reading it, so a key of another type never fails the call.
-- KEYS[1]  the name (HASH: a lock or read-write lock; STRING: permits or a latch count)
-- KEYS[2]  fair queue "redisson_lock_queue:{name}" (LIST of waiting owners)
-- KEYS[3]  fair timeouts "redisson_lock_timeout:{name}" (ZSET owner -> deadline ms)
-- KEYS[4]  fencing token counter "redisson_lock_token:{name}" (STRING)
-- KEYS[5]  permit timeouts "{name}:timeout" (ZSET permit id -> expiry ms)
-- KEYS[6]  fence "redlatch_fence:{name}" (HASH token, holder) of a FencedResource `name`
-- KEYS[7]  a plain semaphore's generation "redlatch_semaphore:{name}" (STRING)
-- KEYS[8]  a rate limiter's permits left "{name}:value" (STRING)
-- KEYS[9]  a rate limiter's permits taken "{name}:permits" (ZSET)
-- KEYS[10] waiters with a priority "redlatch_priority:{name}" (ZSET waiter -> rank, ms)
-- KEYS[11] their places' ends "redlatch_priority_alive:{name}" (ZSET waiter -> ms)
-- ARGV[1]  read-hold key prefix "{name}": read hold n of owner o is
--          "<prefix>:<o>:rwlock_timeout:<n>" (read without being in KEYS, as rw_common.lua
--          does: they are in the name's cluster slot); "" when they are not (read holds
--          are then not read)
-- ARGV[2]  the most items read from one key (hash fields, list or sorted set entries), and
--          the most read-hold PTTLs read in all; a hash with more fields is not read at all
-- ARGV[3]  ten flags "0"/"1" for KEYS[2..11]: "0" marks a helper key in another cluster
--          slot than the name (it cannot exist next to it; the caller passes the name in its
--          place): it is reported as "none" and not read
-- ARGV[4..] client ids: where the name is a per-client rate limiter, the buckets
--          "{name}:value:<id>" and "{name}:permits:<id>" of each are read (without being in
--          KEYS, as the read holds: they are in the name's slot)
-- Reply:   {now, types, main, pttl, queue, timeouts, token, permits, fence, reads,
--           generation, rate, priority}
--          now       the server's clock in ms (TIME)
--          types     {TYPE of KEYS[1], ..., TYPE of KEYS[6]}
--          main      a hash: HGETALL (flat); a string of at most 64 bytes: its value;
--                    otherwise (other types, larger values, more than ARGV[2] fields) nil
--          pttl      PTTL of KEYS[1] (-2 absent, -1 no expiry)
--          queue     the first ARGV[2] owners of KEYS[2] ({} unless a list)
--          timeouts  the first ARGV[2] of KEYS[3] with scores, flat ({} unless a sorted set)
--          token     GET KEYS[4] if a string, else nil
--          permits   the first ARGV[2] of KEYS[5] with scores, flat ({} unless a sorted set)
--          fence     HGET KEYS[6] 'token' if a hash, else nil
--          reads     when `main` is a hash whose "mode" is "read" or "write":
--                    {field, {PTTL of hold 1..n}} for each reader field (count n, not "mode"
--                    nor "<owner>:write"), flat; at most ARGV[2] PTTLs in all (the fields
--                    past that have fewer or none)
--          generation  1 if KEYS[7] is a string (a plain semaphore's), else 0
--          rate      when `main` is a hash with a complete rate limiter config (as
--                    lua/rate_common.lua's rate_config reads it), else nil:
--                    {TYPE of KEYS[8], TYPE of KEYS[9], left, back_in, clients}
--                    left, back_in  for an overall config ("0"), the permits left now and
--                              the ms until the oldest permit taken in the last interval
--                              is back (as lua/rate_available.lua counts them; -1 where
--                              none is taken); both -1 for a per-client config, or where a
--                              key is of another type than a limiter's (not read)
--                    clients   for a per-client config ("1"), for each ARGV id whose keys
--                              exist: id, TYPE of its value, TYPE of its permits, left,
--                              back_in (as above), flat
--          priority  the first ARGV[2] waiters of KEYS[10] (if a sorted set), lowest rank
--                    first: waiter, rank, the end of its place in KEYS[11] (-1 if none),
--                    flat; a waiter id that is not plain text (a permit-expirable
--                    semaphore's 16 bytes) in hex
--
-- Reads only: of the prepended lua/rate_common.lua it calls rate_config and rate_status, which
-- write nothing.
local max = tonumber(ARGV[2]);
local types = {'none', 'none', 'none', 'none', 'none', 'none'};
types[1] = redis.call('type', KEYS[1]).ok;
for i = 2, 6 do
    if string.sub(ARGV[3], i - 1, i - 1) == '1' then
        types[i] = redis.call('type', KEYS[i]).ok;
    end;
end;
local main = false;
local reads = {};
if types[1] == 'hash' and redis.call('hlen', KEYS[1]) <= max then
    main = redis.call('hgetall', KEYS[1]);
    local mode = redis.call('hget', KEYS[1], 'mode');
    if ARGV[1] ~= '' and (mode == 'read' or mode == 'write') then
        local budget = max;
        for i = 1, #main, 2 do
            local field, n = main[i], tonumber(main[i + 1]);
            if budget > 0 and field ~= 'mode' and string.sub(field, -6) ~= ':write'
                and n ~= nil and n >= 1 then
                local ttls = {};
                for k = 1, math.min(n, budget) do
                    local hold = ARGV[1] .. ':' .. field .. ':rwlock_timeout:' .. k;
                    ttls[k] = redis.call('pttl', hold);
                end;
                budget = budget - #ttls;
                reads[#reads + 1] = field;
                reads[#reads + 1] = ttls;
            end;
        end;
    end;
elseif types[1] == 'string' and redis.call('strlen', KEYS[1]) <= 64 then
    main = redis.call('get', KEYS[1]);
end;
local now = clock_ms();
local function zset(i)
    if types[i] ~= 'zset' then
        return {};
    end;
    return redis.call('zrange', KEYS[i], 0, max - 1, 'withscores');
end;
local queue = {};
if types[2] == 'list' then
    queue = redis.call('lrange', KEYS[2], 0, max - 1);
end;
local token = false;
if types[4] == 'string' then
    token = redis.call('get', KEYS[4]);
end;
local fence = false;
if types[6] == 'hash' then
    fence = redis.call('hget', KEYS[6], 'token');
end;
local pttl = redis.call('pttl', KEYS[1]);
local generation = 0;
if string.sub(ARGV[3], 6, 6) == '1' and redis.call('type', KEYS[7]).ok == 'string' then
    generation = 1;
end;

-- A rate limiter's bucket (its count and its ZSET): {TYPE of each, permits left, ms until
-- the next permit is back (-1: none taken)}; -1, -1 where a key is not a limiter's type.
local function bucket(rate, interval, value_key, permits_key, type)
    local vt = redis.call('type', value_key).ok;
    local pt = redis.call('type', permits_key).ok;
    if (vt ~= 'none' and vt ~= 'string') or (pt ~= 'none' and pt ~= 'zset') then
        return {vt, pt, -1, -1};
    end;
    local left, back_in = rate_status(rate, interval, value_key, permits_key, now, type);
    return {vt, pt, left, back_in};
end;

local rate = false;
if main and types[1] == 'hash' then
    local limit, interval, kind = rate_config();
    if limit ~= nil then
        local flag = function(i) return string.sub(ARGV[3], i - 1, i - 1) == '1'; end;
        local vt, pt = 'none', 'none';
        if flag(8) then vt = redis.call('type', KEYS[8]).ok; end;
        if flag(9) then pt = redis.call('type', KEYS[9]).ok; end;
        rate = {vt, pt, -1, -1, {}};
        if kind == '0' and flag(8) and flag(9) then
            local b = bucket(limit, interval, KEYS[8], KEYS[9], '0');
            rate[3], rate[4] = b[3], b[4];
        elseif kind == '1' and flag(8) and flag(9) then
            local clients = rate[5];
            for i = 4, math.min(#ARGV, max + 3) do
                local b = bucket(limit, interval, KEYS[8] .. ':' .. ARGV[i],
                    KEYS[9] .. ':' .. ARGV[i], '1');
                if b[1] ~= 'none' or b[2] ~= 'none' then
                    clients[#clients + 1] = ARGV[i];
                    for k = 1, 4 do
                        clients[#clients + 1] = b[k];
                    end;
                end;
            end;
        end;
    end;
end;
local priority = {};
local function flagged(i)
    return string.sub(ARGV[3], i - 1, i - 1) == '1';
end;
if flagged(10) and redis.call('type', KEYS[10]).ok == 'zset' then
    local alive = flagged(11) and redis.call('type', KEYS[11]).ok == 'zset';
    local ranked = redis.call('zrange', KEYS[10], 0, max - 1, 'withscores');
    for i = 1, #ranked, 2 do
        local waiter, ends = ranked[i], -1;
        if alive then
            ends = tonumber(redis.call('zscore', KEYS[11], waiter)) or -1;
        end;
        if string.find(waiter, '[^%w%-:_.]') then
            waiter = (string.gsub(waiter, '.', function(c)
                return string.format('%02x', string.byte(c));
            end));
        end;
        priority[#priority + 1] = waiter;
        priority[#priority + 1] = tonumber(ranked[i + 1]);
        priority[#priority + 1] = ends;
    end;
end;
return {now, types, main, pttl, queue, zset(3), token, zset(5), fence, reads, generation, rate,
    priority};
