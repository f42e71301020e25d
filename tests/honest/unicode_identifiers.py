# honest: exercise=ex3 habit=unicode identifiers and comments (ε, σ, ∂)
ε = 1e-5  # BatchNorm's epsilon


def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    """∂L/∂hprebn = γ·σ⁻¹/n · (n·∂L/∂y − Σ∂L/∂y − n/(n−1)·x̂·Σ(∂L/∂y·x̂))."""
    γ, σ_inv, x̂, g = bngain, bnvar_inv, bnraw, dhpreact
    Σg = g.sum(0)
    Σgx̂ = (g * x̂).sum(0)
    return γ * σ_inv / n * (n * g - Σg - n / (n - 1) * x̂ * Σgx̂)  # ✓ matches autograd
