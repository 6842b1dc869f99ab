# Sourced by the praise checks' scripts (gate_check_praise_fifth.sh, _reread.sh, _copies.sh, _sixth.sh, _all.sh, _seventh.sh): one step
# of a check (check), and a held-out family read blind (blind_read).
#
#   check DIR GRADER ARGS...
# One gate check of rubric and rubric_genre, 8 seed pairs per agent, into DIR: ARGS (options, then overrides),
# GRADER grading (conf/grader) and the caller's `defence` overrides after them; timed into "$out/wall.txt" and
# skipped where DIR holds a finished check. Then its comparisons with today's default gate, rubric_genre read as
# it is and ranked by the test's measure (compare_rubric_genre.md, compare_rubric_genre_ranked.md).
declare -A threshold_of=([smollm2]=15 [qwen2.5-0.5b]=54)

check() {
  local dir=$1 grader=$2; shift 2
  # Named relative to the output folder in wall.txt and the comparisons, so that they name no path of this machine.
  local where=${dir#"$out"/}
  if [ ! -f "$dir/gate_check.md" ]; then
    local start; start=$(date +%s)
    ms-data gate-check --gate rubric,rubric_genre --per-agent 8 --out "$dir" "$@" "grader=$grader" "${defence[@]}"
    echo "$where: $(($(date +%s) - start)) s" | tee -a "$out/wall.txt"
  fi
  for other in rubric_genre rubric_genre_ranked; do
    (cd "$out" && ms-data gate-compare "$where" "$where" --gate rubric --other-gate "$other" \
      --threshold "${threshold_of[$grader]}") >"$dir/compare_$other.md"
  done
}

# A held-out family read blind: KIND written by each writer (OPTION WRITER), Qwen2.5-0.5B then Gemma 3 270M, each
# read once by each grader, into $out/NAME_by_WRITER/GRADER, with the commit it ran at in $out/commit.txt.
#   blind_read OPTION KIND NAME
blind_read() {
  local option=$1 kind=$2 name=$3
  mkdir -p "$out"
  git log --oneline -1 >"$out/commit.txt"
  git status --short >>"$out/commit.txt"
  for writer in qwen2.5-0.5b gemma3; do
    for grader in smollm2 qwen2.5-0.5b; do
      check "$out/${name}_by_$writer/$grader" "$grader" "$option" "$writer" --only "$kind"
    done
  done
}
