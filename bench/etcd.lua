-- etcd v3's HTTP gateway (grpc-gateway, JSON with base64 bytes) with the keys and summary line
-- of common.lua: PUT by default, OP=get for ranges of one key.
--   KEYS=100000 wrk -t1 -c16 -d30s --latency -s bench/etcd.lua http://127.0.0.1:2379
-- (etcd 3.4: POST /v3/kv/put {"key": b64, "value": b64}, POST /v3/kv/range {"key": b64}.)
package.path = debug.getinfo(1, "S").source:match("@?(.*/)") .. "?.lua;" .. package.path
local c = require("common")

setup, init, done = c.setup, c.init, c.done

local b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(s)
   local out = {}
   for i = 1, #s, 3 do
      local a, b, d = s:byte(i, i + 2)
      local n = a * 65536 + (b or 0) * 256 + (d or 0)
      local c1 = math.floor(n / 262144) % 64
      local c2 = math.floor(n / 4096) % 64
      local c3 = math.floor(n / 64) % 64
      local c4 = n % 64
      out[#out + 1] = b64chars:sub(c1 + 1, c1 + 1) .. b64chars:sub(c2 + 1, c2 + 1) ..
         (b and b64chars:sub(c3 + 1, c3 + 1) or "=") .. (d and b64chars:sub(c4 + 1, c4 + 1) or "=")
   end
   return table.concat(out)
end

local value = base64(c.value)
local get = os.getenv("OP") == "get"
local headers = { ["Content-Type"] = "application/json" }

request = function()
   local key = base64(c.prefix .. c.random_key())
   if get then
      return wrk.format("POST", "/v3/kv/range", headers, '{"key":"' .. key .. '"}')
   end
   return wrk.format("POST", "/v3/kv/put", headers, '{"key":"' .. key .. '","value":"' .. value .. '"}')
end
