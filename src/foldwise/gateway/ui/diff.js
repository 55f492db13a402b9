// A word-level diff (longest common subsequence) between two texts, for the summary panel.

const MAX_CELLS = 4_000_000; // the LCS table of the part that differs; beyond it, diff lines

/** Words and the whitespace between them, as tokens (joining them gives the text back). */
export function tokenize(text) {
  return (text || "").match(/\s+|[^\s]+/g) || [];
}

function lcsOps(a, b) {
  // Table of LCS lengths of the suffixes, then one walk from the start.
  const n = a.length;
  const m = b.length;
  const width = m + 1;
  const table = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      table[i * width + j] =
        a[i] === b[j]
          ? table[(i + 1) * width + j + 1] + 1
          : Math.max(table[(i + 1) * width + j], table[i * width + j + 1]);
    }
  }
  const ops = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      ops.push(["same", a[i]]);
      i++;
      j++;
    } else if (table[(i + 1) * width + j] >= table[i * width + j + 1]) {
      ops.push(["del", a[i++]]);
    } else {
      ops.push(["ins", b[j++]]);
    }
  }
  while (i < n) ops.push(["del", a[i++]]);
  while (j < m) ops.push(["ins", b[j++]]);
  return ops;
}

function diffTokens(a, b) {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const head = a.slice(0, start).map((t) => ["same", t]);
  const tail = a.slice(endA).map((t) => ["same", t]);
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  let middle;
  if ((midA.length + 1) * (midB.length + 1) <= MAX_CELLS) {
    middle = lcsOps(midA, midB);
  } else {
    // Too large for a word table: diff whole lines, then treat each changed line as a unit.
    const lines = (tokens) => tokens.join("").split(/(?<=\n)/);
    middle = lcsOps(lines(midA), lines(midB));
  }
  return [...head, ...middle, ...tail];
}

/**
 * The edit from `before` to `after` as runs `[{op: "same"|"ins"|"del", text}]`, adjacent
 * tokens of one kind merged.
 */
export function wordDiff(before, after) {
  const runs = [];
  for (const [op, text] of diffTokens(tokenize(before), tokenize(after))) {
    const last = runs[runs.length - 1];
    if (last && last.op === op) last.text += text;
    else runs.push({ op, text });
  }
  return runs;
}
