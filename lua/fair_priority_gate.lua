-- The gate of a fair lock acquire with a priority: runs before lua/fair_acquire.lua (its
-- KEYS[1..5] and ARGV[1..6] are that script's, ARGV[6] given) and, for a caller that joins
-- the queue, takes its place in Redisson's queue by rank rather than at the tail. The rank is
-- as lua/priority_common.lua says (join time minus priority times the aging step, lowest
-- first), and the place is before the first waiter ranked after the caller, but never before
-- the head: its turn may have begun, and it has been told, or will be, on its own channel.
-- Every waiter in the queue has a rank in KEYS[6]: ours with a priority get theirs when they
-- join, any other (Redisson's, ours without one) when a gate first sees it, as a waiter of
-- priority 0 joining then; waiters with a priority check in every half thread wait, so that
-- is soon after it joined. The waiters behind the new place get one thread wait more on their
-- deadline, as Redisson's scripts give them one less when a waiter ahead leaves: a Redisson
-- waiter, which never moves its own, is not skipped as dead for the place it was put back.
-- lua/fair_acquire.lua then finds the caller queued and sets its deadline as for any waiter
-- in its place.
-- KEYS[6]  ranks "redlatch_priority:{name}" (ZSET owner -> rank, ms, server clock)
-- ARGV[7]  priority (integer, 0 to 1,000,000)
-- ARGV[8]  aging step in ms (a waiter gains one priority per step waited)
-- ARGV[9]  how long in ms the ranks outlive the last acquire with a priority (a caller
--          whose turn it is takes its rank out, and the last waiter takes them all)
-- Reply:   none of its own: lua/fair_acquire.lua's
-- Reads first: a key of another type fails the script before anything is written.
local holds = redis.call('hlen', KEYS[1]);
local queued = redis.call('lrange', KEYS[2], 0, -1);
if #queued > 0 then
    local now = clock_ms();
    local ranks, here = {}, {};
    for i, waiter in ipairs(queued) do
        local rank = tonumber(redis.call('zscore', KEYS[6], waiter));
        if rank == nil then
            rank = now;
            redis.call('zadd', KEYS[6], rank, waiter);
        end;
        ranks[i] = rank;
        here[waiter] = true;
    end;
    if queued[1] == ARGV[2] and holds == 0 then
        -- Its turn: lua/fair_acquire.lua takes the lock, and its rank goes (all of them
        -- with the last waiter).
        if #queued == 1 then
            redis.call('del', KEYS[6]);
        else
            redis.call('zrem', KEYS[6], ARGV[2]);
        end;
    elseif ARGV[4] == '1' and not here[ARGV[2]] and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
        -- Joining: the ranks of waiters no longer queued go first.
        for _, waiter in ipairs(redis.call('zrange', KEYS[6], 0, -1)) do
            if not here[waiter] then
                redis.call('zrem', KEYS[6], waiter);
            end;
        end;
        local mine = now - tonumber(ARGV[7]) * tonumber(ARGV[8]);
        redis.call('zadd', KEYS[6], mine, ARGV[2]);
        for i = 2, #queued do
            if ranks[i] > mine then
                redis.call('linsert', KEYS[2], 'BEFORE', queued[i], ARGV[2]);
                for j = i, #queued do
                    if redis.call('zscore', KEYS[3], queued[j]) then
                        redis.call('zincrby', KEYS[3], ARGV[3], queued[j]);
                    end;
                end;
                break;
            end;
        end;
        -- Ranked after everyone: lua/fair_acquire.lua puts the caller at the tail.
    end;
    redis.call('pexpire', KEYS[6], ARGV[9]);
end;
