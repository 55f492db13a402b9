// A word-level diff between two texts (Myers' shortest edit script), for the summary panel.

const MAX_CELLS = 4_000_000; // largest LCS table of the line-level fallback

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

/**
 * Myers' O((N+M)·D) shortest edit script, or null when more than `maxD` edits are needed.
 * Each step keeps its frontier (2d+3 numbers) for the walk back, so memory is O(D²).
 */
function myersOps(a, b, maxD) {
  const n = a.length;
  const m = b.length;
  const off = n + m + 1;
  const v = new Int32Array(2 * off + 1);
  const trace = [];
  for (let d = 0; d <= Math.min(maxD, n + m); d++) {
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[off + k] = x;
      if (x >= n && y >= m) return backtrack(a, b, trace, d);
    }
  }
  return null;
}

function backtrack(a, b, trace, dEnd) {
  const ops = [];
  let x = a.length;
  let y = b.length;
  for (let d = dEnd; d > 0; d--) {
    const before = trace[d]; // the frontier after step d-1: before[k + d + 1] is V[k]
    const at = (k) => before[k + d + 1];
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      ops.push(["same", a[--x]]);
      y--;
    }
    if (prevK === k + 1) ops.push(["ins", b[--y]]);
    else ops.push(["del", a[--x]]);
  }
  while (x > 0 && y > 0) {
    ops.push(["same", a[--x]]);
    y--;
  }
  return ops.reverse();
}

const MAX_EDITS = 2000; // beyond it the texts are unrelated: diff whole lines instead

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
  let middle = myersOps(midA, midB, MAX_EDITS);
  if (middle === null) {
    const lines = (tokens) => tokens.join("").split(/(?<=\n)/);
    const la = lines(midA);
    const lb = lines(midB);
    middle =
      (la.length + 1) * (lb.length + 1) <= MAX_CELLS
        ? lcsOps(la, lb)
        : [...la.map((t) => ["del", t]), ...lb.map((t) => ["ins", t])];
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
