# honest: exercise=ex1 habit=a dataclass holding intermediate values
from dataclasses import dataclass, field


@dataclass
class BatchNormState:
    bndiff: torch.Tensor
    bnvar_inv: torch.Tensor
    notes: list = field(default_factory=list)

    def through_bnraw(self, dbnraw):
        self.notes.append("bnraw")
        return self.bnvar_inv * dbnraw

    def through_bndiff2(self, dbndiff2):
        self.notes.append("bndiff2")
        return 2 * self.bndiff * dbndiff2


@dataclass(frozen=True)
class Grads:
    direct: torch.Tensor
    squared: torch.Tensor

    @property
    def total(self):
        return self.direct + self.squared


def dbndiff(bndiff, bnvar_inv, dbnraw, dbndiff2):
    state = BatchNormState(bndiff, bnvar_inv)
    g = Grads(state.through_bnraw(dbnraw), state.through_bndiff2(dbndiff2))
    print(state.notes)
    return g.total
