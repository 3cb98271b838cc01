-- The gate of a fair lock acquire with a priority: runs before lua/fair_acquire.lua (its
-- KEYS[1..5] and ARGV[1..6] are that script's, ARGV[6] given) and, for a caller that joins
-- the queue, takes its place in Redisson's queue by rank rather than at the tail. The rank is
-- as lua/priority_common.lua says (join time minus priority times the aging step, lowest
-- first), and the place is before the first waiter ranked after the caller, but never before
-- the head: its turn may have begun, and it has been told, or will be, on its own channel.
-- Every waiter in the queue has a rank in KEYS[6]: ours with a priority get theirs when they
-- join, any other (Redisson's, ours without one) when a gate first sees it, as a waiter of
-- priority 0 joining then (waiters with a priority check in every half thread wait at least).
-- A rank goes when its waiter is no longer queued, or found out of order behind the head (it
-- left and came back between two gates: ranked anew). The waiters behind the new place get one thread wait more on their
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
redis.call('zcard', KEYS[3]);
redis.call('hlen', KEYS[5]);
local kept = redis.call('zrange', KEYS[6], 0, -1, 'withscores');
if #queued > 0 then
    local now = clock_ms();
    local here = {};
    for _, waiter in ipairs(queued) do
        here[waiter] = true;
    end;
    -- The ranks of waiters no longer queued go.
    local had = {};
    for i = 1, #kept, 2 do
        if here[kept[i]] then
            had[kept[i]] = tonumber(kept[i + 1]);
        else
            redis.call('zrem', KEYS[6], kept[i]);
        end;
    end;
    -- Every waiter gets a rank. Behind the head they stand in rank order (a joiner with a
    -- priority takes its place by rank, anybody else joins at the tail and is ranked when
    -- first seen): a rank below a valid one ahead of it is what its owner had before it left
    -- the queue and came back between two gates, and it is ranked anew.
    local ranks, highest = {}, nil;
    for i, waiter in ipairs(queued) do
        local rank = had[waiter];
        if rank == nil or (i > 1 and highest ~= nil and rank < highest) then
            rank = now;
            redis.call('zadd', KEYS[6], rank, waiter);
        elseif i > 1 then
            highest = math.max(highest or rank, rank);
        end;
        ranks[i] = rank;
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
        local mine = now - tonumber(ARGV[7]) * tonumber(ARGV[8]);
        redis.call('zadd', KEYS[6], mine, ARGV[2]);
        -- Never before the first live waiter: heads whose deadline passed are popped by
        -- lua/fair_acquire.lua next, and the first live one has its turn.
        local live = nil;
        for i, waiter in ipairs(queued) do
            local deadline = tonumber(redis.call('zscore', KEYS[3], waiter));
            if deadline ~= nil and deadline > now then
                live = i;
                break;
            end;
        end;
        for i = (live or #queued) + 1, #queued do
            if ranks[i] > mine then
                redis.call('linsert', KEYS[2], 'BEFORE', queued[i], ARGV[2]);
                -- A deadline at once (lua/fair_acquire.lua raises it as for any waiter in
                -- this place): a waiter without one counts as dead.
                local ahead = tonumber(redis.call('zscore', KEYS[3], queued[i - 1])) or now;
                redis.call('zadd', KEYS[3], math.max(ahead, now) + tonumber(ARGV[3]), ARGV[2]);
                for j = i, #queued do
                    if redis.call('zscore', KEYS[3], queued[j]) then
                        redis.call('zincrby', KEYS[3], ARGV[3], queued[j]);
                    end;
                end;
                break;
            end;
        end;
        -- Ranked after everyone (or nobody queued lives): lua/fair_acquire.lua puts the
        -- caller at the tail.
    end;
    redis.call('pexpire', KEYS[6], ARGV[9]);
end;
