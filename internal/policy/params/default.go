package params

// defaultJSON is a copy of policies/data.json; TestDefaultMatchesPolicies
// keeps the two equal.
const defaultJSON = `{
  "trainyard": {
    "params": {
      "capacity_share": 0.9,
      "gpu_preservation": {
        "enabled": false,
        "reserved": [],
        "reserved_per_node": 0,
        "cpu_only_roles": [
          "rollout_worker",
          "selfplay"
        ]
      },
      "tiers": [
        {
          "tier": 1,
          "min_vram_mb": 80000
        },
        {
          "tier": 2,
          "min_vram_mb": 32000
        },
        {
          "tier": 3,
          "min_vram_mb": 8000
        }
      ],
      "tier_preferences": {
        "training": [
          1,
          2
        ],
        "sweep-trial": [
          1,
          2
        ],
        "evaluation": [
          2
        ],
        "selfplay": [
          3,
          2,
          1
        ]
      },
      "board_min_vram_mb": {
        "hex8": 8000,
        "square8": 8000,
        "square19": 16000,
        "hexagonal": 32000
      },
      "config_quotas": {
        "hexagonal_4p": 0.25,
        "hexagonal_3p": 0.15,
        "hexagonal_2p": 0.1,
        "square19_4p": 0.15,
        "square19_3p": 0.1,
        "square19_2p": 0.05,
        "square8_*": 0.1,
        "hex8_*": 0.1
      },
      "quota_window_hours": 24,
      "max_training_per_config": 1,
      "starvation": {
        "boost_after_seconds": 14400,
        "boost": 100
      },
      "providers": {
        "ephemeral": [
          "vast"
        ],
        "cost_per_gpu_hour": {
          "vast": 0.35,
          "vultr": 1.2,
          "nebius": 1.6,
          "runpod": 2.2,
          "local": 0,
          "lab": 0
        },
        "preferences": {
          "training": {
            "prefer": [
              "runpod",
              "nebius"
            ],
            "avoid": [
              "vast"
            ]
          },
          "selfplay": {
            "prefer": [
              "vast"
            ],
            "fallback": [
              "runpod",
              "vultr"
            ]
          }
        }
      }
    }
  }
}
`
