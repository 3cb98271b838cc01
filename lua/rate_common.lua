-- Prelude of every rate limiter script (Redisson's RRateLimiter layout, prepended by
-- src/scripts.rs after lua/clock.lua). Each script's KEYS[1..5] are:
-- KEYS[1]  config "name" (HASH: rate, interval in ms, type "0" overall or "1" per client,
--          and keepAliveTime in ms where Redisson 3.38 or later set it)
-- KEYS[2]  permits left "{name}:value" (STRING), for type "0"
-- KEYS[3]  permits left "{name}:value:<client id>", for type "1"
-- KEYS[4]  permits taken "{name}:permits" (ZSET: member struct.pack('Bc0I', #random, random,
--          permits), score the ms it was taken), for type "0"
-- KEYS[5]  permits taken "{name}:permits:<client id>", for type "1"
--
-- The count of KEYS[2] and the permits of KEYS[4] taken in the last interval add up to the
-- rate. Redisson trusts the count; these scripts recount from the ZSET whenever the count
-- cannot be right (absent while permits are taken, negative, not a number, or over the rate
-- once the expired permits are back): counting entries (`rate - ZCARD`, Redisson before
-- 3.35) would over-admit where an entry holds more than one permit.

local function not_set()
    return redis.error_reply('NORATE rate limiter is not set up (no rate, interval or type)');
end;

-- The config, or nil where it is incomplete: rate, interval (numbers >= 1), type
-- ("0"/"1"), keepAliveTime (a number, 0 where none).
local function rate_config()
    local c = redis.call('hmget', KEYS[1], 'rate', 'interval', 'type', 'keepAliveTime');
    local rate, interval = tonumber(c[1]), tonumber(c[2]);
    if rate == nil or interval == nil or rate < 1 or interval < 1
        or (c[3] ~= '0' and c[3] ~= '1') then
        return nil;
    end;
    return rate, interval, c[3], tonumber(c[4]) or 0;
end;

-- The count and ZSET keys of a type.
local function rate_keys(type)
    if type == '1' then
        return KEYS[3], KEYS[5];
    end;
    return KEYS[2], KEYS[4];
end;

-- The permits of a ZSET member (0 for a member no client wrote).
local function permits_of(member)
    local ok, _, n = pcall(struct.unpack, 'Bc0I', member);
    if ok and n then
        return n;
    end;
    return 0;
end;

local function sum_permits(members)
    local n = 0;
    for _, m in ipairs(members) do
        n = n + permits_of(m);
    end;
    return n;
end;

-- What is left at `now`, with the permits taken up to `now - interval` back: the count
-- left (below 0 where a lowered rate is still over-committed: it stays so until enough
-- comes back; callers clamp it only in what they reply), and whether entries expired (the
-- caller removes them where it writes).
--
-- The count is trusted only where it can be right cheaply: an overall limiter's count that
-- leaves room for the entries still in the interval, at least a permit each (ZCARD costs
-- what a read does; summing them, as many reads as entries). Otherwise the entries' permits
-- are summed: where the count is absent, negative or too high for the entries; where no
-- entry is in the interval (nothing is taken: the whole rate is left, even where the count
-- says less); and always for a per-client limiter, whose rate another client may have
-- changed without recounting this bucket. A count raised without removing entries
-- (Redisson 4's release) by no more than the entries' permits beyond one each passes (see
-- the guide's chapter on rate limits).
local function rate_left(rate, interval, value_key, permits_key, now, type)
    local expired = redis.call('zrangebyscore', permits_key, '-inf', now - interval);
    local back = sum_permits(expired);
    local value = tonumber(redis.call('get', value_key));
    local taken = redis.call('zcard', permits_key) - #expired;
    if taken == 0 then
        return rate, #expired > 0;
    end;
    if type ~= '1' and value ~= nil and value >= 0 and value + back + taken <= rate then
        return value + back, #expired > 0;
    end;
    local used = sum_permits(redis.call('zrangebyscore', permits_key,
        '(' .. (now - interval), '+inf'));
    return rate - used, #expired > 0;
end;

-- What a status reads: the permits left now (never below 0) and the ms until the oldest
-- permit taken in the last interval is back (-1 where none is taken).
local function rate_status(rate, interval, value_key, permits_key, now, type)
    local left = math.max(rate_left(rate, interval, value_key, permits_key, now, type), 0);
    local oldest = redis.call('zrangebyscore', permits_key, '(' .. (now - interval), '+inf',
        'WITHSCORES', 'LIMIT', 0, 1);
    local back_in = -1;
    if oldest[2] then
        back_in = math.max(tonumber(oldest[2]) + interval - now, 1);
    end;
    return left, back_in;
end;

-- Keeps the count and the ZSET as long as the config lives: for keepAliveTime ms from now
-- where it is set (Redisson 3.38 and later), else the config's own expiry, if any.
local function rate_keep(value_key, permits_key, keep_alive)
    if keep_alive > 0 then
        redis.call('pexpire', KEYS[1], keep_alive);
        redis.call('pexpire', value_key, keep_alive);
        redis.call('pexpire', permits_key, keep_alive);
        return;
    end;
    local ttl = redis.call('pttl', KEYS[1]);
    if ttl > 0 then
        redis.call('pexpire', value_key, ttl);
        redis.call('pexpire', permits_key, ttl);
    end;
end;

-- When (ms from `now`) `need` more permits than the `left` ones are back: when the oldest
-- entries that hold them expire. One interval if the ZSET cannot say (it holds fewer).
local function rate_wait(interval, permits_key, now, need)
    local entries = redis.call('zrangebyscore', permits_key, '(' .. (now - interval), '+inf',
        'WITHSCORES', 'LIMIT', 0, need);
    local back = 0;
    for i = 1, #entries, 2 do
        back = back + permits_of(entries[i]);
        if back >= need then
            return math.max(tonumber(entries[i + 1]) + interval - now, 1);
        end;
    end;
    return interval;
end;
