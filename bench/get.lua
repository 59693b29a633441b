-- GET of random keys key<0..KEYS-1> (fill them first: kvctl bench fill --key-prefix key --keys KEYS).
--   wrk -t1 -c16 -d30s --latency -s bench/get.lua http://127.0.0.1:18080
package.path = debug.getinfo(1, "S").source:match("@?(.*/)") .. "?.lua;" .. package.path
local c = require("common")

setup, init, done = c.setup, c.init, c.done

request = function()
   return wrk.format("GET", c.path(c.random_key()))
end
