-- Shared by the read-write unlock scripts (prepended to them).
-- The longest remaining lease of any live read hold of lock `name`, whose hold-timeout keys are
-- "<prefix>:<owner>:rwlock_timeout:<n>"; -2 when none is alive (all released or expired).
-- Only holds whose own timeout key lives count: a reader that died does not keep the lock.
local function rw_longest_read_hold(name, prefix)
    local longest = -2;
    for _, field in ipairs(redis.call('hkeys', name)) do
        local count = tonumber(redis.call('hget', name, field));
        if count ~= nil then
            for n = count, 1, -1 do
                local ttl = redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. n);
                longest = math.max(longest, ttl);
            end;
        end;
    end;
    return longest;
end;
