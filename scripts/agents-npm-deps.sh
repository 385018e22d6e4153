#!/usr/bin/env bash
# Installs the real coding agents the agent tests drive (Claude Code, Codex, Pi, opencode),
# exactly as tests/agents/package-lock.json pins them. Idempotent (see npm-deps.sh).
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/npm-deps.sh" tests/agents
