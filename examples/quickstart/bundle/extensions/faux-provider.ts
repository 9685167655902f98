// faux-provider.ts: an offline, zero-token model for driving a real
// `pi --mode rpc` (@mariozechner/pi-coding-agent 0.73.1) in pifleet's tests.
//
// Load it with:
//   pi --mode rpc --offline --no-extensions -e testdata/pi/faux-provider.ts \
//      --provider faux --model faux-1
//
// It registers provider "faux" with model "faux-1" and a streamSimple that
// never touches the network: the reply is computed from the conversation
// only, following the directive language documented in README.md next to
// this file. examples/scriptedworker implements the very same language in
// Go, so tests can compare the two workers event for event.
//
// Environment:
//   PIFLEET_FAUX_COST            cost.total of every successful assistant message (default 0)
//   PIFLEET_FAUX_CHUNK           characters per streamed delta (default 16)
//   PIFLEET_FAUX_DELAY_MS        pause before every streamed delta (default 0)
//   PIFLEET_FAUX_CONTEXT_WINDOW  the model's context window (default 128000)
//   PIFLEET_FAUX_SCRIPT          a script of replies for an orchestrating pi (see README.md)

import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { readFileSync } from "node:fs";
import {
	type AssistantMessage,
	type AssistantMessageEventStream,
	type Context,
	type Model,
	type SimpleStreamOptions,
	createAssistantMessageEventStream,
} from "@mariozechner/pi-ai";

type Block =
	| { kind: "text"; text: string }
	| { kind: "thinking"; text: string }
	| { kind: "tool"; name: string; args: Record<string, unknown> };

interface Plan {
	blocks: Block[];
	delayMs: number;
	// error ends the reply with stopReason "error" and this message.
	error?: string;
}

const DIRECTIVE = /^(say|think|bash|write|read|tool|delay|error|fail):[ \t]?(.*)$/;

function envNumber(name: string, fallback: number): number {
	const raw = process.env[name];
	if (raw === undefined || raw.trim() === "") return fallback;
	const n = Number(raw);
	return Number.isFinite(n) && n >= 0 ? n : fallback;
}

function textOf(content: unknown): string {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.filter((part: any) => part && part.type === "text")
		.map((part: any) => String(part.text))
		.join("\n");
}

function firstLine(s: string): string {
	const i = s.indexOf("\n");
	return i < 0 ? s : s.slice(0, i);
}

// script is PIFLEET_FAUX_SCRIPT's steps (separated by lines "---"), read
// once: the reply to a context holding N assistant messages follows step N
// whatever the last message is, so an orchestrator can chain tool calls and
// react to the messages that wake it without a user.
let script: string[] | undefined;
function scriptSteps(): string[] {
	if (script === undefined) {
		const file = process.env.PIFLEET_FAUX_SCRIPT;
		script = file ? readFileSync(file, "utf8").split(/^---[ \t]*$/m).map((step) => step.trim()) : [];
	}
	return script;
}

// substitute replaces every ${name} with the value of the last "name=value"
// in the context (tool results and messages), so a step can use the ids
// earlier tool calls returned.
function substitute(step: string, messages: Context["messages"]): string {
	const texts = messages.map((m: any) => textOf(m.content)).join("\n");
	return step.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name: string) => {
		const re = new RegExp(`\\b${name}=([A-Za-z0-9_:-]+)`, "g");
		let value: string | undefined;
		for (const m of texts.matchAll(re)) value = m[1];
		return value ?? whole;
	});
}

// failures counts, per user message, how many `fail:` attempts were made, so
// that a retried request (pi resends the same context) eventually succeeds.
const failures = new Map<string, number>();

// planFor decides the whole reply before anything is streamed.
function planFor(context: Context): Plan {
	const messages = context.messages;
	const plan: Plan = { blocks: [], delayMs: envNumber("PIFLEET_FAUX_DELAY_MS", 0) };
	if ((context.systemPrompt ?? "").startsWith("You are a context summarization assistant")) {
		// pi's compaction asks the model for a summary.
		plan.blocks.push({ kind: "text", text: "faux: summary" });
		return plan;
	}
	const last = messages[messages.length - 1];
	if (!last) {
		plan.blocks.push({ kind: "text", text: "faux: (empty context)" });
		return plan;
	}
	const steps = scriptSteps();
	const step = steps[messages.filter((m) => m.role === "assistant").length];
	if (step !== undefined) {
		return planDirectives(plan, substitute(step, messages), `script:${messages.length}`);
	}
	if (last.role === "toolResult") {
		// Every tool result after the last assistant message, in order.
		let start = messages.length - 1;
		while (start > 0 && messages[start - 1].role === "toolResult") start--;
		const parts = messages.slice(start).map((m: any) => {
			const line = firstLine(textOf(m.content));
			return `${m.toolName}=${m.isError ? "ERROR: " : ""}${line}`;
		});
		plan.blocks.push({ kind: "text", text: `faux: tool results: ${parts.join("; ")}` });
		return plan;
	}
	if (last.role !== "user") {
		plan.blocks.push({ kind: "text", text: "faux: (nothing to answer)" });
		return plan;
	}

	return planDirectives(plan, textOf(last.content), `${(last as any).timestamp}`);
}

// planDirectives adds the blocks of the directive lines of text to plan;
// key identifies the message for fail: counting.
function planDirectives(plan: Plan, text: string, key0: string): Plan {
	const plain: string[] = [];
	for (const rawLine of text.split("\n")) {
		const line = rawLine.replace(/^[ \t]+/, "").replace(/\r$/, "");
		const m = DIRECTIVE.exec(line);
		if (!m) {
			plain.push(rawLine);
			continue;
		}
		const [, name, rest] = m;
		switch (name) {
			case "say":
				plan.blocks.push({ kind: "text", text: rest });
				break;
			case "think":
				plan.blocks.push({ kind: "thinking", text: rest });
				break;
			case "bash":
				plan.blocks.push({ kind: "tool", name: "bash", args: { command: rest } });
				break;
			case "write": {
				const sp = rest.indexOf(" ");
				const path = sp < 0 ? rest : rest.slice(0, sp);
				const content = sp < 0 ? "" : rest.slice(sp + 1).replace(/\\n/g, "\n");
				plan.blocks.push({ kind: "tool", name: "write", args: { path, content } });
				break;
			}
			case "read":
				plan.blocks.push({ kind: "tool", name: "read", args: { path: rest.trim() } });
				break;
			case "tool": {
				const sp = rest.indexOf(" ");
				const name = sp < 0 ? rest : rest.slice(0, sp);
				let args: Record<string, unknown> = {};
				if (sp >= 0) {
					try {
						args = JSON.parse(rest.slice(sp + 1));
					} catch {
						args = { raw: rest.slice(sp + 1) };
					}
				}
				plan.blocks.push({ kind: "tool", name, args });
				break;
			}
			case "delay":
				plan.delayMs = Math.max(0, Number(rest) || 0);
				break;
			case "error":
				plan.error = rest;
				break;
			case "fail": {
				// fail: <n> <message>: the first n attempts at this message
				// fail with <message>; later attempts follow the other directives.
				const sp = rest.indexOf(" ");
				const n = Number(sp < 0 ? rest : rest.slice(0, sp)) || 0;
				const msg = sp < 0 ? "faux failure" : rest.slice(sp + 1);
				const key = `${key0}:${text}`;
				const seen = failures.get(key) ?? 0;
				if (seen < n) {
					failures.set(key, seen + 1);
					plan.error = msg;
				}
				break;
			}
		}
	}
	if (plan.blocks.length === 0 && plan.error === undefined) {
		const rest = plain.join("\n").trim();
		plan.blocks.push({ kind: "text", text: `faux: ${rest === "" ? text : rest}` });
	}
	return plan;
}

function chunks(s: string, size: number): string[] {
	if (s.length === 0) return [""];
	const out: string[] = [];
	for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
	return out;
}

// sleep resolves after ms, or at once when signal aborts.
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
	return new Promise((resolve) => {
		if (ms <= 0 || signal?.aborted) return resolve();
		const done = () => {
			clearTimeout(timer);
			signal?.removeEventListener("abort", done);
			resolve();
		};
		const timer = setTimeout(done, ms);
		signal?.addEventListener("abort", done, { once: true });
	});
}

// snapshot copies the message as it is now: pi serialises events later than
// they are pushed, and a live object would show content not streamed yet.
function snapshot(m: AssistantMessage): AssistantMessage {
	return structuredClone(m);
}

function countChars(context: Context): number {
	let n = (context.systemPrompt ?? "").length;
	for (const m of context.messages as any[]) {
		if (m.role === "assistant") {
			for (const b of m.content) n += (b.text ?? b.thinking ?? JSON.stringify(b.arguments ?? "")).length;
		} else {
			n += textOf(m.content).length;
		}
	}
	return n;
}

function streamFaux(model: Model<any>, context: Context, options?: SimpleStreamOptions): AssistantMessageEventStream {
	const stream = createAssistantMessageEventStream();
	const signal = options?.signal;
	const chunkSize = Math.max(1, Math.floor(envNumber("PIFLEET_FAUX_CHUNK", 16)));
	const cost = envNumber("PIFLEET_FAUX_COST", 0);
	const assistantsSoFar = context.messages.filter((m) => m.role === "assistant").length;

	const out: AssistantMessage = {
		role: "assistant",
		content: [],
		api: model.api,
		provider: model.provider,
		model: model.id,
		usage: {
			input: 0,
			output: 0,
			cacheRead: 0,
			cacheWrite: 0,
			totalTokens: 0,
			cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
		},
		stopReason: "stop",
		timestamp: Date.now(),
	};

	const finishAborted = () => {
		out.stopReason = "aborted";
		out.errorMessage = "Request was aborted";
		stream.push({ type: "error", reason: "aborted", error: out });
		stream.end(out);
	};

	(async () => {
		const plan = planFor(context);
		stream.push({ type: "start", partial: snapshot(out) });
		let outChars = 0;
		let toolN = 0;
		for (const block of plan.blocks) {
			const index = out.content.length;
			if (block.kind === "tool") {
				toolN++;
				const call = { type: "toolCall" as const, id: `faux_${assistantsSoFar}_${toolN}`, name: block.name, arguments: {} as Record<string, any> };
				out.content.push(call);
				stream.push({ type: "toolcall_start", contentIndex: index, partial: snapshot(out) });
				const json = JSON.stringify(block.args);
				for (const piece of chunks(json, chunkSize)) {
					await sleep(plan.delayMs, signal);
					if (signal?.aborted) return finishAborted();
					stream.push({ type: "toolcall_delta", contentIndex: index, delta: piece, partial: snapshot(out) });
				}
				call.arguments = block.args;
				outChars += json.length;
				stream.push({ type: "toolcall_end", contentIndex: index, toolCall: call, partial: snapshot(out) });
				continue;
			}
			const isText = block.kind === "text";
			const part: any = isText ? { type: "text", text: "" } : { type: "thinking", thinking: "" };
			out.content.push(part);
			stream.push({ type: isText ? "text_start" : "thinking_start", contentIndex: index, partial: snapshot(out) });
			for (const piece of chunks(block.text, chunkSize)) {
				await sleep(plan.delayMs, signal);
				if (signal?.aborted) return finishAborted();
				if (isText) part.text += piece;
				else part.thinking += piece;
				stream.push({ type: isText ? "text_delta" : "thinking_delta", contentIndex: index, delta: piece, partial: snapshot(out) });
			}
			outChars += block.text.length;
			stream.push({ type: isText ? "text_end" : "thinking_end", contentIndex: index, content: block.text, partial: snapshot(out) });
		}
		if (plan.blocks.length === 0) {
			// An error-only reply still honours delay: (for abort tests).
			await sleep(plan.delayMs, signal);
			if (signal?.aborted) return finishAborted();
		}

		const input = Math.ceil(countChars(context) / 4);
		const output = Math.ceil(outChars / 4);
		out.usage.input = input;
		out.usage.output = output;
		out.usage.totalTokens = input + output;
		if (plan.error !== undefined) {
			out.stopReason = "error";
			out.errorMessage = plan.error;
			stream.push({ type: "error", reason: "error", error: out });
			stream.end(out);
			return;
		}
		out.usage.cost.output = cost;
		out.usage.cost.total = cost;
		out.stopReason = toolN > 0 ? "toolUse" : "stop";
		stream.push({ type: "done", reason: out.stopReason, message: out });
		stream.end(out);
	})().catch((err) => {
		out.stopReason = "error";
		out.errorMessage = err instanceof Error ? err.message : String(err);
		stream.push({ type: "error", reason: "error", error: out });
		stream.end(out);
	});
	return stream;
}

export default function fauxProvider(pi: ExtensionAPI) {
	pi.registerProvider("faux", {
		name: "Faux (pifleet tests)",
		// Never contacted: streamSimple below answers every request.
		baseUrl: "http://127.0.0.1:9/faux",
		// A literal key: pi only checks that one exists.
		apiKey: "pifleet-faux-key",
		api: "pifleet-faux",
		streamSimple: streamFaux,
		models: [
			{
				id: "faux-1",
				name: "Faux 1",
				reasoning: true,
				input: ["text"],
				cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
				contextWindow: envNumber("PIFLEET_FAUX_CONTEXT_WINDOW", 128000),
				maxTokens: 16384,
			},
		],
	});

	pi.registerCommand("faux-ui", {
		description: "Open a confirm dialog and record the answer (pifleet tests)",
		handler: async (args, ctx) => {
			const timeout = Number(args.trim()) || 0;
			const confirmed = await ctx.ui.confirm("faux-ui", "Proceed?", timeout > 0 ? { timeout } : undefined);
			ctx.ui.notify(`faux-ui: ${confirmed ? "confirmed" : "declined"}`, "info");
			pi.appendEntry("faux-ui", { confirmed });
		},
	});

	pi.registerCommand("faux-mark", {
		description: "Append a custom faux-mark entry (pifleet tests)",
		handler: async (args) => {
			pi.appendEntry("faux-mark", { text: args });
		},
	});
}
