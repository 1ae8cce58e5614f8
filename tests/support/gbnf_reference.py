"""A slow, independent GBNF reference for the grammar tests: a small parser and a
memoized backtracking matcher over code points (what the native matcher's parse stacks
must agree with), and a random sentence generator."""
from __future__ import annotations

import random
import re

END = -1  # "the text ran out inside this node": some continuation may still match


class Reference:
    def __init__(self, text: str, root: str = "root"):
        self.src = text
        self.i = 0
        self.rules: dict[str, tuple] = {}
        self._parse()
        self.root = ("ref", root)

    # ---- parsing -------------------------------------------------------------
    def _space(self):
        while self.i < len(self.src):
            c = self.src[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif c == "#":
                while self.i < len(self.src) and self.src[self.i] != "\n":
                    self.i += 1
            else:
                break

    def _rule_start(self) -> bool:
        return re.match(r"[A-Za-z0-9_-]+\s*::=", self.src[self.i:]) is not None

    def _parse(self):
        self._space()
        while self.i < len(self.src):
            m = re.match(r"([A-Za-z0-9_-]+)\s*::=", self.src[self.i:])
            assert m, self.src[self.i:self.i + 20]
            self.i += m.end()
            self.rules[m.group(1)] = self._alts(0)
            self._space()

    def _alts(self, depth):
        alts = [self._seq(depth)]
        while self.i < len(self.src) and self.src[self.i] == "|":
            self.i += 1
            alts.append(self._seq(depth))
        return ("alt", alts)

    def _seq(self, depth):
        items = []
        while True:
            self._space()
            if self.i >= len(self.src) or self.src[self.i] in "|)":
                break
            if depth == 0 and self._rule_start():
                break
            item = self._atom(depth)
            self._space()
            items.append(self._postfix(item))
        return ("seq", items)

    def _postfix(self, item):
        if self.i >= len(self.src):
            return item
        c = self.src[self.i]
        if c in "*+?":
            self.i += 1
            return ("rep", item, 1 if c == "+" else 0, 1 if c == "?" else None)
        if c == "{":
            m = re.match(r"\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}", self.src[self.i:])
            self.i += m.end()
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            return ("rep", item, lo, hi)
        return item

    def _char(self) -> str:
        c = self.src[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = self.src[self.i + 1]
        self.i += 2
        simple = {"n": "\n", "r": "\r", "t": "\t", "0": "\0"}
        if e in simple:
            return simple[e]
        n = {"x": 2, "u": 4, "U": 8}.get(e)
        if n:
            v = int(self.src[self.i:self.i + n], 16)
            self.i += n
            return chr(v)
        return e

    def _atom(self, depth):
        c = self.src[self.i]
        if c == '"':
            self.i += 1
            chars = []
            while self.src[self.i] != '"':
                chars.append(self._char())
            self.i += 1
            return ("seq", [("chars", False, [(ch, ch)]) for ch in chars])
        if c == "[":
            self.i += 1
            neg = self.src[self.i] == "^"
            if neg:
                self.i += 1
            ranges = []
            while self.src[self.i] != "]":
                lo = self._char()
                hi = lo
                if self.src[self.i] == "-" and self.src[self.i + 1] != "]":
                    self.i += 1
                    hi = self._char()
                ranges.append((lo, hi))
            self.i += 1
            return ("chars", neg, ranges)
        if c == ".":
            self.i += 1
            return ("chars", True, [])
        if c == "(":
            self.i += 1
            inner = self._alts(depth + 1)
            assert self.src[self.i] == ")"
            self.i += 1
            return inner
        m = re.match(r"[A-Za-z0-9_-]+", self.src[self.i:])
        self.i += m.end()
        return ("ref", m.group(0))

    # ---- matching ------------------------------------------------------------
    def _ends(self, node, pos, text, memo):
        key = (id(node), pos)
        if key in memo:
            return memo[key]
        kind = node[0]
        out = set()
        if kind == "chars":
            if pos == len(text):
                out = {END}
            else:
                ch = text[pos]
                inside = any(lo <= ch <= hi for lo, hi in node[2])
                out = {pos + 1} if inside != node[1] else set()
        elif kind == "ref":
            out = self._ends(self.rules[node[1]], pos, text, memo)
        elif kind == "alt":
            for alt in node[1]:
                out |= self._ends(alt, pos, text, memo)
        elif kind == "seq":
            cur = {pos}
            for item in node[1]:
                nxt = set()
                for p in cur:
                    for e in self._ends(item, p, text, memo):
                        if e == END:
                            out.add(END)
                        else:
                            nxt.add(e)
                cur = nxt
            out |= cur
        else:  # rep
            _, x, lo, hi = node
            cur, count, seen = {pos}, 0, set()
            if lo == 0:
                out |= cur
            while cur and (hi is None or count < hi):
                nxt = set()
                for p in cur:
                    for e in self._ends(x, p, text, memo):
                        if e == END:
                            out.add(END)
                        else:
                            nxt.add(e)
                count += 1
                if count >= lo:
                    out |= nxt
                    nxt -= seen
                    seen |= nxt
                cur = nxt
        memo[key] = out
        return out

    def matches(self, text: str) -> bool:
        """The whole text is a sentence."""
        return len(text) in self._ends(self.root, 0, text, {})

    def viable(self, text: str) -> bool:
        """Some sentence starts with text (it is one, or it may go on to one)."""
        ends = self._ends(self.root, 0, text, {})
        return END in ends or len(text) in ends

    # ---- generating ----------------------------------------------------------
    def sentence(self, rng: random.Random, budget: int = 150) -> str | None:
        """A random sentence (None when the budget of expansions ran out)."""
        self._budget = budget
        try:
            return self._gen(self.root, rng)
        except RecursionError:
            return None
        except _OutOfBudget:
            return None

    def _gen(self, node, rng):
        kind = node[0]
        if kind == "chars":
            neg, ranges = node[1], node[2]
            if neg:
                for _ in range(50):
                    ch = rng.choice("abcxyz019 ,:{}[]\"\\\n-é日")
                    if not any(lo <= ch <= hi for lo, hi in ranges):
                        return ch
                raise _OutOfBudget
            lo, hi = rng.choice(ranges)
            return chr(rng.randint(ord(lo), ord(hi)))
        if kind == "ref":
            self._budget -= 1
            if self._budget < 0:
                raise _OutOfBudget
            return self._gen(self.rules[node[1]], rng)
        if kind == "alt":
            return self._gen(rng.choice(node[1]), rng)
        if kind == "seq":
            return "".join(self._gen(x, rng) for x in node[1])
        _, x, lo, hi = node
        n = rng.randint(lo, lo + 2 if hi is None else min(hi, lo + 4))
        return "".join(self._gen(x, rng) for _ in range(n))


class _OutOfBudget(Exception):
    pass
