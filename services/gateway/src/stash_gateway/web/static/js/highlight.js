// Message text with fenced code and JSON highlighted. Only spans are added around the original
// characters, never a character removed or inserted, so the element's text is exactly the step's
// content and a selection's offsets inside it are the content's own (quotes stay exact).

import { h } from "./dom.js";

const FENCE = /```([\w+-]*)\n[\s\S]*?(?:```|$)/g;
const TOKEN = /("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(#[^\n]*|\/\/[^\n]*)|\b(\d+(?:\.\d+)?)\b|\b(def|class|return|if|elif|else|for|while|in|import|from|as|with|try|except|finally|raise|function|const|let|var|async|await|new|true|false|null|None|True|False|fn|pub|use|struct|impl|match)\b/g;
const TOKEN_CLASSES = ["tok-string", "tok-comment", "tok-number", "tok-keyword"];

/** The content of a step as nodes: plain text, with code fences (and JSON content) highlighted. */
export function messageNodes(content) {
  if (looksLikeJson(content)) return [codeSpan(content)];
  const nodes = [];
  let last = 0;
  for (const match of content.matchAll(FENCE)) {
    if (match.index > last) nodes.push(document.createTextNode(content.slice(last, match.index)));
    nodes.push(codeSpan(match[0]));
    last = match.index + match[0].length;
  }
  if (last < content.length) nodes.push(document.createTextNode(content.slice(last)));
  return nodes;
}

function looksLikeJson(content) {
  const trimmed = content.trim();
  return (trimmed.startsWith("{") && trimmed.endsWith("}")) || (trimmed.startsWith("[") && trimmed.endsWith("]"));
}

/** A block of code with its tokens in coloured spans (its text unchanged). */
export function codeSpan(code) {
  const block = h("span", { class: "code-block" });
  let last = 0;
  for (const match of code.matchAll(TOKEN)) {
    if (match.index > last) block.append(code.slice(last, match.index));
    const group = match.slice(1).findIndex((part) => part !== undefined);
    block.append(h("span", { class: TOKEN_CLASSES[group] }, match[0]));
    last = match.index + match[0].length;
  }
  if (last < code.length) block.append(code.slice(last));
  return block;
}
