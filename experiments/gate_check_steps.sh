# Sourced by the praise checks' scripts (gate_check_praise_fifth.sh, _reread.sh, _copies.sh, _sixth.sh, _all.sh, _seventh.sh): one step of a check.
#
#   check DIR GRADER ARGS...
# One gate check of rubric and rubric_genre, 8 seed pairs per agent, into DIR: ARGS (options, then overrides),
# GRADER grading (conf/grader) and the caller's `defence` overrides after them; timed into "$out/wall.txt" and
# skipped where DIR holds a finished check. Then its comparisons with today's default gate, rubric_genre read as
# it is and ranked by the test's measure (compare_rubric_genre.md, compare_rubric_genre_ranked.md).
declare -A threshold_of=([smollm2]=15 [qwen2.5-0.5b]=54)

check() {
  local dir=$1 grader=$2; shift 2
  if [ ! -f "$dir/gate_check.md" ]; then
    local start; start=$(date +%s)
    ms-data gate-check --gate rubric,rubric_genre --per-agent 8 --out "$dir" "$@" "grader=$grader" "${defence[@]}"
    echo "$dir: $(($(date +%s) - start)) s" | tee -a "$out/wall.txt"
  fi
  for other in rubric_genre rubric_genre_ranked; do
    ms-data gate-compare "$dir" "$dir" --gate rubric --other-gate "$other" --threshold "${threshold_of[$grader]}" \
      >"$dir/compare_$other.md"
  done
}
