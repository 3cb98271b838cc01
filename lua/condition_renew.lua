-- Renew the leases of many condition waiters in one call (the watchdog's batch).
-- KEYS[2i-1]   the i-th waiter's condition "redlatch_condition:{name}:<condition>" (ZSET)
-- KEYS[2i]     that condition's queue "redlatch_condition_queue:{name}:<condition>" (LIST)
-- ARGV[1]      lease in milliseconds
-- ARGV[i+1]    the i-th waiter id
-- Reply:       array of one integer per waiter: 1 = still there, its deadline now + ARGV[1]
--              (negated if a notification picked it and it has yet to take it), 0 = gone (its
--              lease ran out and it was dropped): its renewal stops, and its thread looks at
--              once. Dead waiters of the same conditions are pruned on the way (see the
--              helpers): a notification a dead waiter held goes on within a third of a lease.
local res = {};
local now = clock_ms();
local lease = tonumber(ARGV[1]);
for i = 1, #KEYS / 2 do
    local waiters, queue, id = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1];
    local score = redis.pcall('zscore', waiters, id);
    if type(score) == 'string' then
        local deadline = now + lease;
        if tonumber(score) < 0 then
            deadline = -deadline;
        end;
        redis.call('zadd', waiters, deadline, id);
        cond_prune(waiters, queue, now);
        cond_keep(waiters, 2 * lease);
        cond_keep(queue, 2 * lease);
        res[i] = 1;
    else
        res[i] = 0;
    end;
end;
return res;
