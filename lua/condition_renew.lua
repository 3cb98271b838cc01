-- Renew the leases of many condition waiters in one call (the watchdog's batch).
-- KEYS[2i-1]   the i-th waiter's condition "redlatch_condition:{name}:<condition>" (ZSET)
-- KEYS[2i]     that condition's queue "redlatch_condition_queue:{name}:<condition>" (LIST)
-- ARGV[1]      lease in milliseconds
-- ARGV[i+1]    the i-th waiter id
-- Reply:       array of one integer per waiter: 1 = still there (its deadline is now +
--              ARGV[1], or a notification picked it and it has yet to take it), 0 = gone (its
--              lease ran out and it was dropped): its renewal stops, and its thread looks at
--              once
local res = {};
local now = cond_now();
local lease = tonumber(ARGV[1]);
for i = 1, #KEYS / 2 do
    local waiters, queue, id = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1];
    local score = redis.pcall('zscore', waiters, id);
    if type(score) == 'string' then
        if tonumber(score) >= 0 then
            redis.call('zadd', waiters, now + lease, id);
        end;
        cond_keep(waiters, 2 * lease);
        cond_keep(queue, 2 * lease);
        res[i] = 1;
    else
        res[i] = 0;
    end;
end;
return res;
