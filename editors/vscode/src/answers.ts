// What the editor does with the answer of dice.fill / dice.optimize
// (dice_lsp.core.outcome.Outcome.to_json plus "applied").
//
// The server already shows a message for every end except success; the client says when a
// candidate was applied, and offers the candidates when none was.

export interface CandidateSummary {
  index: number;
  title: string;
  status: string;
  message: string;
}

export interface GenerateAnswer {
  job: string | null;
  message: string;
  best: number | null;
  candidates: CandidateSummary[];
  applied?: boolean;
  cancelled?: boolean;
  error?: boolean;
}

export type FollowUp =
  | { kind: "applied"; message: string }
  | { kind: "pick"; job: string; candidates: CandidateSummary[] }
  | { kind: "none" };

function isGenerateAnswer(value: unknown): value is GenerateAnswer {
  return (
    value !== null &&
    typeof value === "object" &&
    typeof (value as GenerateAnswer).message === "string" &&
    Array.isArray((value as GenerateAnswer).candidates)
  );
}

export function followUp(answer: unknown): FollowUp {
  if (!isGenerateAnswer(answer) || answer.cancelled || answer.error) {
    return { kind: "none" };
  }
  if (answer.applied) {
    return { kind: "applied", message: answer.message };
  }
  if (answer.job !== null && answer.candidates.length > 0) {
    return { kind: "pick", job: answer.job, candidates: answer.candidates };
  }
  return { kind: "none" };
}

/** The line to show for a dice.profile answer (a profiler Verdict as JSON), if it is one. */
export function profileMessage(answer: unknown): string | undefined {
  if (answer === null || typeof answer !== "object") {
    return undefined;
  }
  const verdict = answer as { status?: unknown; message?: unknown; kernel?: unknown };
  if (typeof verdict.status !== "string" || typeof verdict.message !== "string") {
    return undefined; // an error or a cancellation: the server has said so
  }
  const kernel = typeof verdict.kernel === "string" ? `${verdict.kernel}: ` : "";
  return `DICE: ${kernel}${verdict.message}`;
}
