package repair

import "ringkv/node/ring"

func fmtRange(start, end uint64) string { return ring.FormatRange(start, end) }
