# GPU tiers and board matching (seed 002): a GPU role of a board needs an
# unreserved GPU with at least the board's minimum VRAM. Work whose config
# names no known board (say, an Atari run) has no VRAM floor unless it sets
# work.board explicitly.
package trainyard.admission

import rego.v1

board_min_vram := params.board_min_vram_mb[board]

deny contains {
	"rule": "gpu_tier",
	"reason": sprintf("board %s needs a GPU with at least %v GB VRAM; the largest unreserved GPU has %v GB", [board, gb(board_min_vram), gb(largest)]),
} if {
	count(gpu_roles) > 0
	largest := largest_free_vram
	largest < board_min_vram
}

deny contains {
	"rule": "gpu_tier",
	"reason": sprintf("unknown board %s: no minimum VRAM is configured for it", [board]),
} if {
	count(gpu_roles) > 0
	input.work.board
	not params.board_min_vram_mb[board]
}

placement_deny contains {
	"rule": "gpu_tier",
	"reason": sprintf("role %s is placed on GPU %d of node %s with %v GB; board %s needs %v GB", [p.role, g.index, p.node, gb(vram), board, gb(board_min_vram)]),
} if {
	some p in input.placement
	some g in object.get(p, "gpus", [])
	some dev in object.get(nodes_by_name[p.node], "gpus", [])
	dev.index == g.index
	vram := dev.vram_mb
	vram < board_min_vram
}
