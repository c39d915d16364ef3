#!/usr/bin/env python3
"""Reference renderings of the chat templates in tests/data/chat/ for tests/tokenizer.rs.

Each template (a model's own `tokenizer.chat_template`, as the model's files on the Hugging Face
hub carry it) is rendered by transformers' `render_jinja_template`, the function behind
`apply_chat_template` (jinja2 with trim_blocks and lstrip_blocks, transformers' own `tojson`,
`raise_exception` and `strftime_now`), for every conversation below, with and without the
generation prompt. `strftime_now` is pinned to NOW so that the output does not depend on the day.

Writes tests/data/chat/conversations.txt (the conversations, one field per line, content escaped
as `\\n` and `\\\\`) and tests/data/chat/expected.txt:

    template FILE BOS EOS
    render FILE CONVERSATION ADD_GENERATION_PROMPT(0|1) ok|error NBYTES
    <NBYTES bytes: the rendering, or the template's error message>

Usage (in a virtual environment with `pip install transformers jinja2`; no torch needed):
    python tools/make_chat_references.py
"""

import datetime as _dt
import os
import sys

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "chat")

# 2026-11-28 09:05:03 UTC; the Rust test renders at the same instant.
NOW = _dt.datetime(2026, 11, 28, 9, 5, 3)


class _PinnedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


ctu.datetime = _PinnedDatetime

# (template file, bos_token, eos_token): the special tokens' texts as the model's GGUF vocabulary
# names them (tokenizer.ggml.bos_token_id / eos_token_id).
TEMPLATES = [
    ("Qwen-Qwen3-0.6B.jinja", "<|endoftext|>", "<|im_end|>"),
    ("Qwen-Qwen2.5-7B-Instruct.jinja", "<|endoftext|>", "<|im_end|>"),
    ("meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    ("google-gemma-2-2b-it.jinja", "<bos>", "<eos>"),
    ("microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>"),
    # Ours, not a model's: the Jinja features model templates use (macros, namespace, loop
    # controls, Python string methods, tojson's options, strftime_now's directives).
    ("features.jinja", "<s>", "</s>"),
]

CONVERSATIONS = [
    ("user", [("user", "Hello! Who are you?")]),
    ("system_user", [("system", "You are a helpful assistant."), ("user", "What is 2 + 2?")]),
    (
        "multi_turn",
        [
            ("system", "Answer briefly."),
            ("user", "Name a colour."),
            ("assistant", "Blue."),
            ("user", "  And another one?\nOnly one word, Grüße 世界 🙂.  "),
        ],
    ),
    ("assistant_last", [("user", "Hi"), ("assistant", "Hello there.\n")]),
    (
        "thinking_history",
        [
            ("user", "What is 3 * 4?"),
            ("assistant", "<think>\nThree fours.\n</think>\n\n12"),
            ("user", "And 5 * 6?"),
        ],
    ),
]


def escape(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n")


def main():
    with open(os.path.join(DATA, "conversations.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(f"# made by tools/make_chat_references.py (transformers {transformers.__version__}, jinja2 {jinja2.__version__})\n")
        for name, msgs in CONVERSATIONS:
            f.write(f"conversation {name}\n")
            for role, content in msgs:
                f.write(f"{role} {escape(content)}\n")
    out = bytearray(f"# made by tools/make_chat_references.py (transformers {transformers.__version__}, jinja2 {jinja2.__version__})\n".encode())
    for file, bos, eos in TEMPLATES:
        with open(os.path.join(DATA, file), encoding="utf-8") as f:
            template = f.read()
        out += f"template {file} {bos} {eos}\n".encode()
        for name, msgs in CONVERSATIONS:
            messages = [{"role": r, "content": c} for r, c in msgs]
            for gen in (False, True):
                try:
                    rendered, _ = ctu.render_jinja_template(
                        conversations=[messages], chat_template=template, add_generation_prompt=gen, bos_token=bos, eos_token=eos
                    )
                    status, body = "ok", rendered[0].encode()
                except jinja2.exceptions.TemplateError as e:
                    status, body = "error", str(e).encode()
                out += f"render {file} {name} {int(gen)} {status} {len(body)}\n".encode() + body + b"\n"
    with open(os.path.join(DATA, "expected.txt"), "wb") as f:
        f.write(out)
    print(f"wrote {len(TEMPLATES)} templates x {len(CONVERSATIONS)} conversations x 2", file=sys.stderr)


if __name__ == "__main__":
    main()
